"""The differential fidelity suite: the corpus, its two runners, and the README's table.

Each case of ``corpus/<group>/<name>.sh`` is one command line, run twice with exactly the same
text: in the in-memory provider (``run_command(script, stdin=...)`` in a fresh instance, cwd
``/workspace``) and in real GNU bash on the host (``bash -c "$script"`` in a fresh temporary
folder, the oracle). Optional companions: ``<name>.stdin`` (the bytes fed as stdin; without it
stdin is empty) and ``<name>.files/`` (files copied into the working folder first, modes kept).

The oracle's environment is pinned and shaped like an instance's: a temporary root holding
``workspace`` (the cwd), ``home/user`` (``HOME``) and ``tmp`` (``TMPDIR``), ``USER=user``,
``SHELL=/bin/bash``, ``LC_ALL=C``, ``TZ=UTC``, umask 022, and a ``PATH`` whose first folder links
``awk`` to gawk and ``sh`` to bash (the provider's ``sh`` is its bash too). Its output has the
temporary root's paths replaced by the instance's (``/workspace``, ``/home/user``, ``/tmp``).

Compared: stdout exactly, stderr by shape (empty or not), the exit code. A case that differs must
be listed in the package README's "Fidelity against bash" table with its reason; ``run.py
--update-table`` rewrites that table from the current results.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import anyio

from pai.sandbox import create_sandbox, create_sandbox_session_manager
from pai.sandbox.provider import FileWrite, SandboxProvider

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
README = HERE.parents[1] / "README.md"

TIMEOUT = 3.0
"""Seconds a case may run, on either side, before it is killed (and reported as timed out)."""

WORKDIR = "/workspace"
HOME = "/home/user"
TMP = "/tmp"

REQUIRE_ORACLE_VARIABLE = "PAI_REQUIRE_BASH_ORACLE"

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where the oracle finds its programs (after the folder of links): fixed, not the caller's
``PATH``, so that what the check found is what the scripts run."""

SECTION = "## Fidelity against bash"
TABLE_HEADER = "| Case | Difference | Reason |"
TABLE_RULE = "| --- | --- | --- |"
TODO_REASON = "TODO: reason"
UPDATE_COMMAND = "uv run python packages/sandbox-inmemory/tests/fidelity/run.py --update-table"

_SUMMARY = re.compile(r"^\*\*\d+ of \d+\*\* scripts of the corpus run identically \([\d.]+%\)\.$")


# -- the corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One script of the corpus, with what it is fed."""

    name: str
    """``group/name``, the path under ``corpus/`` without ``.sh``."""
    script: str
    stdin: bytes | None
    files: tuple[tuple[str, bytes, int], ...]
    """Files put in the working folder before the script runs: relative path, content, mode."""


def load_corpus(root: Path = CORPUS) -> list[Case]:
    """Every case under ``root``, sorted by name."""
    cases: list[Case] = []
    for path in sorted(root.glob("*/*.sh")):
        name = f"{path.parent.name}/{path.stem}"
        stdin_path = path.with_suffix(".stdin")
        seed = path.with_suffix(".files")
        files = tuple(
            (
                str(each.relative_to(seed)),
                each.read_bytes(),
                0o755 if each.stat().st_mode & 0o100 else 0o644,
            )
            for each in sorted(seed.rglob("*"))
            if each.is_file()
        )
        cases.append(
            Case(
                name=name,
                script=path.read_text(encoding="utf-8"),
                stdin=stdin_path.read_bytes() if stdin_path.exists() else None,
                files=files,
            )
        )
    return cases


def select(cases: Iterable[Case], substrings: Sequence[str]) -> list[Case]:
    """The cases whose name contains any of ``substrings`` (all of them when none is given)."""
    return [case for case in cases if not substrings or any(s in case.name for s in substrings)]


# -- outcomes and their comparison --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one side printed and how it exited."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False


def describe_difference(bash: Outcome, mine: Outcome, reference: str = "bash") -> str | None:
    """How the in-memory outcome differs from bash's (or ``reference``'s), in a few words;
    ``None`` when identical (stdout equal, stderr both empty or both non-empty, exit codes
    equal)."""
    parts: list[str] = []
    if mine.timed_out and not bash.timed_out:
        parts.append("times out")
    elif bash.timed_out and not mine.timed_out:
        parts.append(f"{reference} times out")
    if mine.stdout != bash.stdout:
        parts.append("stdout")
    if bool(mine.stderr) != bool(bash.stderr):
        parts.append("stderr " + ("printed" if mine.stderr else "missing"))
    if mine.exit_code != bash.exit_code and not mine.timed_out:
        parts.append(f"exit {mine.exit_code} ({reference} {bash.exit_code})")
    return "; ".join(parts) if parts else None


def compare(
    cases: Sequence[Case],
    bash: Mapping[str, Outcome],
    mine: Mapping[str, Outcome],
    reference: str = "bash",
) -> dict[str, str]:
    """``{case name: difference}`` for every case that differs."""
    found: dict[str, str] = {}
    for case in cases:
        difference = describe_difference(bash[case.name], mine[case.name], reference)
        if difference is not None:
            found[case.name] = difference
    return found


def summary(total: int, differing: int) -> str:
    """The summary line the runner prints: ``N of M identical (P%)``."""
    same = total - differing
    return f"{same} of {total} identical ({percent(same, total)}%)"


def percent(part: int, total: int) -> str:
    return f"{100 * part / total:.1f}" if total else "0.0"


# -- the oracle: real GNU bash on the host ------------------------------------------------------

_ORACLE_TOOLS = {
    "bash": ("bash", "GNU bash"),
    "gawk": ("gawk", "GNU Awk"),
    "jq": ("jq", "jq-"),
    "sed": ("sed", "GNU sed"),
    "grep": ("grep", "GNU grep"),
    "ls": ("ls", "GNU coreutils"),
}


def oracle_missing() -> str | None:
    """Why the host cannot be the oracle (a tool missing, or not the GNU one), or ``None``."""
    problems: list[str] = []
    for name, (program, banner) in _ORACLE_TOOLS.items():
        path = shutil.which(program, path=SYSTEM_PATH)
        if path is None:
            problems.append(f"`{name}` is not installed (looked in {SYSTEM_PATH})")
            continue
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, errors="replace", check=False
        )
        if banner not in version.stdout:
            problems.append(f"`{name}` is not {banner.rstrip('-')} ({path})")
    if not problems:
        return None
    return (
        "the bash oracle needs GNU bash, coreutils, sed, grep, gawk and jq on the host: "
        + "; ".join(problems)
    )


@contextmanager
def oracle_bin() -> Iterator[Path]:
    """A folder put first on the oracle's ``PATH``: ``awk`` is gawk, ``sh`` is bash."""
    with tempfile.TemporaryDirectory(prefix="fidelity-bin-") as folder:
        path = Path(folder)
        for name, program in (("awk", "gawk"), ("sh", "bash")):
            target = shutil.which(program, path=SYSTEM_PATH)
            if target is None:
                raise RuntimeError(oracle_missing() or f"{program} is missing")
            (path / name).symlink_to(target)
        yield path


def _normalise(text: str, root: Path) -> str:
    """``text`` with the temporary root's paths as the instance's (the root itself is ``/``)."""
    for real in dict.fromkeys((os.path.realpath(root), str(root))):
        for inside in (WORKDIR, HOME, TMP):
            text = text.replace(real + inside, inside)
        text = text.replace(real + "/", "/").replace(real, "/")
    return text


def run_in_bash(case: Case, bin_folder: Path, timeout: float = TIMEOUT) -> Outcome:
    """Run ``case`` as ``bash -c "$script"`` in a fresh temporary folder with the pinned
    environment (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="fidelity-") as folder:
        root = Path(folder)
        workdir, home, tmp = root / WORKDIR[1:], root / HOME[1:], root / TMP[1:]
        for each in (workdir, home, tmp):
            each.mkdir(parents=True)
        for each in (root, workdir, root / "home", home, tmp):
            each.chmod(0o755)  # as an instance's folders, whatever this process's umask
        for relative, content, mode in case.files:
            target = workdir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(mode)
        env = {
            "HOME": str(home),
            "USER": "user",
            "SHELL": "/bin/bash",
            "PATH": f"{bin_folder}:{SYSTEM_PATH}",
            "LC_ALL": "C",
            "TZ": "UTC",
            "TMPDIR": str(tmp),
        }
        process = subprocess.Popen(
            ["bash", "-c", case.script],  # $0 is "bash", as in the provider
            executable=shutil.which("bash", path=SYSTEM_PATH) or "/bin/bash",
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE if case.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so background jobs die with it
            umask=0o022,
        )
        timed_out = False
        try:
            stdout, stderr = process.communicate(case.stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process.pid)
            stdout, stderr = process.communicate()
        finally:
            _kill_group(process.pid)
        return Outcome(
            stdout=_normalise(stdout.decode("utf-8", "replace"), root),
            stderr=_normalise(stderr.decode("utf-8", "replace"), root),
            exit_code=124 if timed_out else process.returncode,
            timed_out=timed_out,
        )


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_all_in_bash(cases: Sequence[Case], jobs: int = 4) -> dict[str, Outcome]:
    """Every case in the oracle, ``jobs`` at a time."""
    with oracle_bin() as bin_folder, ThreadPoolExecutor(jobs) as pool:
        outcomes = pool.map(lambda case: run_in_bash(case, bin_folder), cases)
        return {case.name: outcome for case, outcome in zip(cases, outcomes, strict=True)}


# -- a provider: in-memory, or Docker for the skills group -------------------------------------


async def run_all_in_sandbox(
    provider: SandboxProvider,
    cases: Sequence[Case],
    *,
    jobs: int = 2,
    timeout: float = TIMEOUT,
) -> dict[str, Outcome]:
    """Every case in a fresh instance of ``provider`` (seeded with the case's files), ``jobs``
    at a time: no more than the in-memory provider's ``max_workers``, since a command waiting
    for a free worker spends its timeout. Each instance is disposed of afterwards."""
    sessions = create_sandbox_session_manager(provider=provider)
    limiter = anyio.CapacityLimiter(jobs)
    outcomes: dict[str, Outcome] = {}

    async def run(case: Case) -> None:
        async with limiter:
            handle = sessions.handle(f"fidelity-{case.name}")
            sandbox = create_sandbox(handle)
            try:
                if case.files:
                    await sandbox.write_files(
                        [
                            FileWrite(f"{WORKDIR}/{relative}", content, mode)
                            for relative, content, mode in case.files
                        ]
                    )
                result = await sandbox.run_command(case.script, stdin=case.stdin, timeout=timeout)
            finally:
                await handle.dispose()
            outcomes[case.name] = Outcome(
                result.stdout, result.stderr, result.exit_code, result.timed_out
            )

    async with anyio.create_task_group() as group:
        for case in cases:
            group.start_soon(run, case)
    return {case.name: outcomes[case.name] for case in cases}


# -- the README's table -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    case: str
    difference: str
    reason: str


@dataclass(frozen=True, slots=True)
class Table:
    """The "Fidelity against bash" section's summary line and known-differences table."""

    summary: str
    rows: dict[str, Row]


class TableError(ValueError):
    """The README's section or table is missing or malformed."""


def _section_bounds(readme: str) -> tuple[int, int]:
    start = readme.find(f"\n{SECTION}\n")
    if start < 0:
        raise TableError(f"the README has no section {SECTION!r}")
    end = readme.find("\n## ", start + 1)
    return start + 1, len(readme) if end < 0 else end + 1


def _cells(line: str) -> list[str]:
    inner = line.strip()
    if not (inner.startswith("|") and inner.endswith("|")):
        raise TableError(f"not a table row: {line!r}")
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner[1:-1])]


def read_table(readme: str) -> Table:
    """The summary line and the rows of the README's known-differences table."""
    start, end = _section_bounds(readme)
    lines = readme[start:end].splitlines()
    summaries = [line for line in lines if _SUMMARY.match(line)]
    if len(summaries) != 1:
        raise TableError(f"the section {SECTION!r} must hold one summary line like {_SUMMARY!r}")
    try:
        header = lines.index(TABLE_HEADER)
    except ValueError:
        raise TableError(f"the section {SECTION!r} has no table headed {TABLE_HEADER!r}") from None
    rows: dict[str, Row] = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if len(cells) != 3:
            raise TableError(f"a row of the table needs three cells: {line!r}")
        case = cells[0].strip("`")
        if case in rows:
            raise TableError(f"the table lists {case!r} twice")
        rows[case] = Row(case, cells[1], cells[2])
    return Table(summaries[0], rows)


def render_summary(total: int, differing: int) -> str:
    same = total - differing
    return f"**{same} of {total}** scripts of the corpus run identically ({percent(same, total)}%)."


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def render_rows(rows: Iterable[Row]) -> list[str]:
    return [
        f"| `{row.case}` | {_escape(row.difference)} | {_escape(row.reason)} |"
        for row in sorted(rows, key=lambda row: row.case)
    ]


def expected_table(total: int, differences: Mapping[str, str], current: Table | None) -> Table:
    """The table the current results call for, keeping the reasons of rows that stay."""
    old = current.rows if current is not None else {}
    rows = {
        case: Row(case, difference, old[case].reason if case in old else TODO_REASON)
        for case, difference in differences.items()
    }
    return Table(render_summary(total, len(differences)), rows)


def rewrite_table(readme: str, table: Table) -> str:
    """``readme`` with the section's summary line and table replaced by ``table``'s; the rest
    of the section and of the README untouched."""
    start, end = _section_bounds(readme)
    lines = readme[start:end].split("\n")
    lines = [table.summary if _SUMMARY.match(line) else line for line in lines]
    header = lines.index(TABLE_HEADER)
    after = header + 2
    while after < len(lines) and lines[after].startswith("|"):
        after += 1
    lines[header:after] = [TABLE_HEADER, TABLE_RULE, *render_rows(table.rows.values())]
    return readme[:start] + "\n".join(lines) + readme[end:]


def table_problems(table: Table, expected: Table, corpus_names: Iterable[str]) -> list[str]:
    """What makes the README's table untrue to the current results: each problem says what to
    change."""
    names = set(corpus_names)
    problems: list[str] = []
    for case, row in sorted(expected.rows.items()):
        if case not in table.rows:
            problems.append(
                f"`{case}` differs from bash ({row.difference}) but is not in the table: fix it, "
                "or add its row with the reason"
            )
        elif table.rows[case].difference != row.difference:
            problems.append(
                f"`{case}`: the table says {table.rows[case].difference!r}, it now differs by "
                f"{row.difference!r}: update its Difference (and Reason if it changed)"
            )
    for case in sorted(table.rows):
        if case not in names:
            problems.append(f"`{case}` is in the table but not in the corpus: remove its row")
        elif case not in expected.rows:
            problems.append(f"`{case}` is in the table but now runs as bash does: remove its row")
    for row in table.rows.values():
        if not row.reason or row.reason.startswith("TODO"):
            problems.append(f"`{row.case}` has no reason yet: write why it differs")
    if table.summary != expected.summary:
        problems.append(
            f"the summary line says {table.summary!r}; it must say {expected.summary!r}"
        )
    return problems
