"""``pai generate skills SRC_DIR [-o MODULE.py] [--check]``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from pai.core.cli import fail, note, warn
from pai.skills._errors import SkillProblem, SkillSourceError, shown_path

EXIT_STALE = 1
"""The exit status of ``--check`` when the module is out of date."""


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def _check_output_outside_skills(src_dir: Path, output: Path) -> None:
    """The module may sit next to the skill folders, not in one: it would become one of that
    skill's files, and each run would change the module it writes."""
    from pai.skills._generate import SKIPPED_FOLDERS

    try:
        parts = output.resolve().relative_to(src_dir.resolve()).parts
    except ValueError:
        return
    if len(parts) >= 2 and not parts[0].startswith(".") and parts[0] not in SKIPPED_FOLDERS:
        fail(
            f"{output} is inside the skill folder {src_dir / parts[0]}, so it would become a "
            f"file of that skill; write it outside {src_dir} or directly in it"
        )


@click.command("skills")
@click.argument(
    "src_dir", type=click.Path(file_okay=False, dir_okay=True, exists=True, path_type=Path)
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The Python module to write (printed to stdout when omitted).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1, naming the skills that changed, when the module is stale.",
)
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Leave invalid skills out (each reported on stderr with its problems) and write the "
    "valid ones; exit 0.",
)
def generate_skills_command(
    src_dir: Path, output: Path | None, check: bool, skip_invalid: bool
) -> None:
    """Turn SRC_DIR's skill folders (each <name>/SKILL.md) into a typed Python module.

    Validates every skill (frontmatter: name equal to the folder, description, license,
    compatibility, metadata, allowed-tools) and reports every problem of every skill at once, with
    its file and line; nothing is written when any skill is invalid, unless --skip-invalid
    leaves those out. The module exports `skills` (a tuple of SkillEntry) and `SkillName` (a
    Literal of every name). The same folder always gives the same bytes.
    """
    from pai.skills._generate import generate_module, staleness  # YAML: only when run

    started = time.perf_counter()
    if output is not None:
        _check_output_outside_skills(src_dir, output)
    try:
        module = generate_module(src_dir, skip_invalid=skip_invalid)
    except SkillSourceError as error:
        fail(str(error) + ("" if skip_invalid else _skip_hint(src_dir)))
    count = len(module.names)
    plural = "s" if count != 1 else ""
    left_out = _warn_skipped(module.skipped)
    if check:
        if output is None:
            fail("--check compares against a module: give it with -o MODULE.py")
        try:
            existing = output.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            fail(
                f"{output} does not exist; run `pai generate skills {src_dir} -o {output}` to "
                "write it"
            )
        except OSError as error:
            fail(f"cannot read {output}: {error.strerror or error}")
        stale = staleness(module, existing)
        if stale is not None:
            # Exit 1, like a formatter's --check: the module is out of date (2 is a usage or
            # skills-folder error).
            click.echo(
                f"Error: {output} is stale ({stale.describe()}); run `pai generate skills "
                f"{src_dir} -o {output}` and commit the result",
                err=True,
            )
            raise click.exceptions.Exit(EXIT_STALE)
        note(f"{output} is up to date ({count} skill{plural}, {_size(module.size)}){left_out}")
        return
    if output is None:
        click.echo(module.text, nl=False)
        note(f"{count} skill{plural}; the module is {_size(module.size)}{left_out}")
        return
    # Encoded first (generate_module checked it can be), then written next to the target and
    # renamed, so a reader never sees half a module and a failure leaves no partial file.
    data = module.text.encode("utf-8")
    partial = output.with_name(f".{output.name}.partial")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        partial.replace(output)
    except BaseException as error:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        if not isinstance(error, OSError):
            raise
        fail(f"cannot write {output}: {error.strerror or error}")
    took = time.perf_counter() - started
    note(
        f"wrote {output}: {count} skill{plural} ({', '.join(module.names)}), "
        f"{_size(module.size)}, in {took:.2f} s{left_out}"
    )


def _skip_hint(src_dir: Path) -> str:
    """How --skip-invalid would help, when some skills are valid."""
    from pai.skills._generate import generate_module

    try:
        valid = len(generate_module(src_dir, skip_invalid=True).names)
    except SkillSourceError:
        return ""  # nothing valid to write, or not a skills folder: the flag would not help
    return (
        f"\nTo write the {valid} valid skill{'s' if valid != 1 else ''} and leave the invalid "
        "ones out, pass --skip-invalid."
    )


def _warn_skipped(skipped: Mapping[str, Sequence[SkillProblem]]) -> str:
    """Warn about each skill left out, with its problems; the summary for the final line."""
    for name, problems in skipped.items():
        lines = "".join(f"\n  {problem}" for problem in problems)
        warn(f"left out the invalid skill '{shown_path(name)}'; fix it and run again:{lines}")
    count = len(skipped)
    if not count:
        return ""
    plural = "s" if count != 1 else ""
    return f"; {count} warning{plural}: {count} invalid skill{plural} left out"
