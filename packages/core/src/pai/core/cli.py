"""The ``pai`` command line: core commands, and whatever installed plugins add.

Run it as ``pai`` (the console script) or, equivalently for every command,
``python -m pai.core`` (use that form when another package's ``pai`` script, such as
pydantic-ai-slim's, has replaced ours). The core brings the commands below; plugins add theirs
through the ``pai_cli`` hook (pai-sandbox adds ``pai providers``, ``pai sandbox ...`` and
``pai demo``)::

    pai plugins [--json]     the plugins of the ``pai`` entry-point group and what became of them
    pai config  [--json]     the resolved configuration: each key, its value, where it came from
                             (secrets as ***); --check validates it as a runtime would,
                             --probe also asks live things (model, sandbox) whether they answer
    pai chat [MODULE:AGENT]  talk to your agent, streamed (--model PROVIDER:NAME, --thread ID);
                             without MODULE:AGENT, the agent ``[chat] agent`` configures
    pai threads ls|show|rm   the stored threads of ``pai chat`` (--json, --scope KEY)
    pai storage check|migrate  the configured storage's schema version; apply what is pending
    pai runs ls|cancel|resume  the durable runs [durability]'s engine recorded; act on one
    pai generate ...         code generators plugins add (``pai generate`` alone lists them)

Every listing takes ``--json`` (a JSON object with stable keys, for scripts). Output is a rich
table when stdout is a terminal and plain aligned text when it is piped. A :class:`PaiError`
(a configuration mistake, an unknown provider, ...) prints one message to stderr and exits with
status 2 (:data:`EXIT_USAGE`), without a traceback.

Writing commands in a plugin::

    import click
    from pai.core.ext import hookimpl
    from pai.core.cli import echo_json, echo_table, json_option

    @click.command("vaults")
    @json_option
    def vaults(as_json: bool) -> None:
        rows = [{"name": "main", "url": "https://vault.example"}]
        if as_json:
            echo_json({"vaults": rows})
        else:
            echo_table(rows, [("name", "Name"), ("url", "URL")])

    @hookimpl
    def pai_cli(cli: click.Group) -> None:
        cli.add_command(vaults)

A plugin that generates code adds its command to the core's ``generate`` group instead, so
every generator is ``pai generate <name>`` (pai-skills adds ``pai generate skills``)::

    from pai.core.cli import generate_group

    @click.command("vault-types", help="Write typed accessors for the configured vaults.")
    def vault_types() -> None: ...

    @hookimpl
    def pai_cli(cli: click.Group) -> None:
        generate_group(cli).add_command(vault_types)

The helpers here are for such commands: :func:`echo_table`, :func:`echo_json`, :func:`note`,
:func:`warn`, :func:`stdout_is_terminal`, :data:`json_option`. Rich is imported only when a table
goes to a terminal, so ``pai ... | cat`` and ``--json`` never pay for it.

A command that reads the configuration gets it from :func:`load_checked_config`, as every core
command does: it applies the same static checks as ``pai config --check`` (tables, capability
ids, the storage URL, every configured capability's options, ``[model]``), so a misspelt table
is an error, never a silent default::

    from pai.core.cli import load_checked_config

    @click.command("vaults")
    def vaults() -> None:
        config = load_checked_config()  # a PaiError (one line, exit 2) on a mistake
        section = config.capability("acme.vault")
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click

from pai.core._cli_chat import chat_command
from pai.core._errors import PaiError

if TYPE_CHECKING:
    from pai.core._config import PaiConfig
    from pai.core._plugins import Plugins

_F = TypeVar("_F", bound=Callable[..., Any])

EXIT_USAGE = 2
"""The exit status of a usage or configuration error (click's own usage errors use it too)."""

EXIT_PROBE_FAILED = 1
"""The exit status of ``pai config --check --probe`` when a live check failed (the
configuration itself is valid)."""


class PaiCliError(click.ClickException):
    """An error the command line reports as one line on stderr, exiting with :data:`EXIT_USAGE`.

    Raise it from a command for a mistake the user can fix; a :class:`PaiError` escaping a
    command is turned into one of these.
    """

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {_masked_message(self.format_message())}", err=True)


class PaiGroup(click.Group):
    """A click group that reports :class:`PaiError` as :class:`PaiCliError` (no traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PaiError as error:
            raise PaiCliError(str(error)) from error


# -- output helpers (public: plugins' commands use them) -------------------------------------------


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal a person reads (rich output) rather than a pipe or a file."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or unusual streams
        return False


def stdin_is_terminal() -> bool:
    """Whether stdin is a terminal, so a command may ask the user a question."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def json_option(command: _F) -> _F:
    """The ``--json`` flag every listing takes; the command receives it as ``as_json``."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print JSON (an object with stable keys) instead of a table.",
    )(command)


def echo_json(data: object) -> None:
    """Print ``data`` as indented JSON on stdout (values JSON cannot hold are printed as text)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def note(message: str) -> None:
    """Tell the user something on stderr (``pai: message``), keeping stdout for results."""
    click.echo(f"pai: {message}", err=True)


def warn(message: str) -> None:
    """Warn on stderr (``pai: warning: message``)."""
    click.echo(f"pai: warning: {message}", err=True)


def fail(message: str) -> NoReturn:
    """Stop the command: print ``Error: message`` on stderr and exit with :data:`EXIT_USAGE`."""
    raise PaiCliError(message)


def cell_text(value: object) -> str:
    """How a table shows one value: ``-`` for ``None``, lists joined with commas, one line."""
    if value is None:
        return "-"
    if isinstance(value, str):
        text = value
    elif isinstance(value, list | tuple | set | frozenset):
        items = cast("Iterable[object]", value)
        text = ", ".join(cell_text(item) for item in items) or "-"
    else:
        text = str(value)
    return " ".join(text.splitlines())


def echo_table(
    rows: Sequence[Mapping[str, object]],
    columns: Sequence[tuple[str, str]],
    *,
    title: str | None = None,
    styles: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Print ``rows`` as a table of ``columns`` (``(key, header)`` pairs).

    A rich table when stdout is a terminal; otherwise plain text: an upper-case header line and
    columns aligned with two spaces, no colour, no box drawing (easy to ``grep`` and ``awk``).
    ``styles`` colours cells in rich output: ``{"status": {"failed": "red"}}``.
    """
    cells = [[cell_text(row.get(key)) for key, _ in columns] for row in rows]
    if stdout_is_terminal():
        _rich_table(cells, columns, title=title, styles=styles or {})
        return
    if title:
        click.echo(title)
    headers = [header.upper() for _, header in columns]
    widths = [
        max(len(headers[i]), *(len(line[i]) for line in cells)) if cells else len(headers[i])
        for i in range(len(columns))
    ]
    for line in [headers, *cells]:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )


def _rich_table(
    cells: Sequence[Sequence[str]],
    columns: Sequence[tuple[str, str]],
    *,
    title: str | None,
    styles: Mapping[str, Mapping[str, str]],
) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text(title, style="bold") if title else None,
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for index, (_, header) in enumerate(columns):
        # The first column names the row: keep it whole where the terminal allows.
        longest = max((len(line[index]) for line in cells), default=0) if index == 0 else 0
        table.add_column(header, min_width=min(longest, 32) or None, overflow="fold")
    for line in cells:
        table.add_row(
            *(
                Text(cell, style=styles.get(key, {}).get(cell, ""))
                for cell, (key, _) in zip(line, columns, strict=True)
            )
        )
    Console(file=sys.stdout).print(table)


# -- core commands --------------------------------------------------------------------------------

_STATUS_STYLES = {"status": {"loaded": "green", "failed": "bold red", "skipped": "yellow"}}


@click.command("plugins")
@json_option
def plugins_command(as_json: bool) -> None:
    """List installed plugins and whether they loaded.

    Lists the entry points of the 'pai' group and what became of each. A plugin that failed to
    import is listed with its error (and skipped; set PAI_STRICT_PLUGINS=1 to make that fatal);
    PAI_LOAD_PLUGINS=dist1,dist2 loads only those (listed as skipped otherwise). The exit status
    is 0 even when a plugin failed.
    """
    from pai.core._plugins import get_plugins

    rows: list[dict[str, object]] = [
        {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
            "status": info.status,
            "hooks": list(info.hooks),
            "error": info.error,
        }
        for info in get_plugins().plugins()
    ]
    if as_json:
        echo_json({"plugins": rows})
        return
    if not rows:
        click.echo("no plugins installed (none in the 'pai' entry-point group)")
        return
    echo_table(
        rows,
        [
            ("name", "Plugin"),
            ("distribution", "Distribution"),
            ("version", "Version"),
            ("hooks", "Hooks"),
            ("status", "Status"),
            ("error", "Error"),
        ],
        styles=_STATUS_STYLES,
    )
    failed = sum(1 for row in rows if row["status"] == "failed")
    if failed:
        warn(
            f"{failed} plugin(s) failed to load and were skipped; fix or uninstall them "
            "(PAI_STRICT_PLUGINS=1 makes this fatal)"
        )


def _config_value(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _defaults(config: Any, registrations: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows for the options a configured capability leaves at their defaults."""
    rows: list[dict[str, Any]] = []
    for cap_id, registration in sorted(registrations.items()):
        section = config.capability(cap_id)
        if section is None:
            continue
        for name, info in registration.options.model_fields.items():
            key = info.alias or name
            if key in section or info.is_required():
                continue
            default = info.get_default(call_default_factory=True)
            rows.append(
                {"key": f"capabilities.{cap_id}.{key}", "value": default, "source": "default"}
            )
    return rows


def load_checked_config() -> PaiConfig:
    """The configuration (:func:`~pai.core.load_config`), checked as every core command checks it.

    Runs the static checks (tables, capability ids, the storage URL, every configured
    capability's options, ``[model]``; no user code is imported and nothing is connected to) and
    raises the first problem as a :class:`~pai.core.PaiError`, which a :class:`PaiGroup` command
    reports as one line. Call it from a synchronous command, before any event loop runs.
    """
    from pai.core._config import load_config
    from pai.core._config_check import check_static

    config = load_config()
    check_static(config)
    return config


def import_target(target: str, *, command: str, example: str) -> object:
    """The object ``"module:attribute"`` names, imported as ``pai chat`` imports its target (the
    working directory is importable): for plugins' commands that take a target too.

    A mistake is a :class:`~pai.core.UserError` naming the module or attribute (with the closest
    name) and how to write a target: ``command`` is the command (``"pai serve"``), ``example``
    a target written out (``"`pai serve myapp.server:pai` for the app `pai` in
    myapp/server.py"``).
    """
    from pai.core._chat_target import TargetSpec
    from pai.core._chat_target import import_target as imported

    return imported(TargetSpec(target, command=command, example=example))


@click.command("config")
@click.option(
    "--check",
    is_flag=True,
    help="Also validate everything a runtime would (tables, capability ids, storage URL, every "
    "configured capability's options, [model], the agent [chat] names); exit non-zero on the "
    "first problem.",
)
@click.option(
    "--probe",
    is_flag=True,
    help="With --check (implied): also check that live things answer (the configured model, "
    "the sandbox engine and image, what plugins probe); one line per probe, non-zero exit if "
    "any failed.",
)
@click.option(
    "--probe-timeout",
    type=click.FloatRange(min=0, min_open=True, max=3600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long each probe may take.",
)
@json_option
def config_command(check: bool, probe: bool, probe_timeout: float, as_json: bool) -> None:
    """Show the resolved configuration and where each value came from.

    Configuration is read from pai.toml, or [tool.pai] of pyproject.toml, in the working directory
    or the nearest folder above it that has one (or the file PAI_CONFIG names);
    PAI_<SECTION>__<KEY> environment variables (PAI_CAPABILITIES__SANDBOX__PROVIDER=docker)
    override it. Options a configured capability leaves unset are shown with their defaults.
    Secrets (values of keys named like key, token, secret or password; passwords in URLs) are
    shown as ***. With --json, an error is printed as JSON too: {"error": {"message", "type",
    "key", "file"}}, exit status 2.
    """
    from pathlib import Path

    from pai.core._config import load_config
    from pai.core._config_check import check_config, check_static
    from pai.core._plugins import get_plugins

    timeout_source = click.get_current_context().get_parameter_source("probe_timeout")
    if timeout_source is click.core.ParameterSource.COMMANDLINE and not probe:
        fail("--probe-timeout sets how long each probe may take; add --probe to run the probes")
    check = check or probe
    config: PaiConfig | None = None
    try:
        config = load_config()
        if check:
            check_config(config)
        else:
            check_static(config)
        registrations = get_plugins().capabilities()
    except PaiError as error:
        if not as_json:
            raise
        _echo_json_error(error, config, check=check)
    files = [str(path) for path in config.files]
    values = [
        {"key": key, "value": value, "source": source} for key, value, source in config.flat()
    ]
    values = sorted([*values, *_defaults(config, registrations)], key=lambda r: r["key"])
    values = [{**row, "value": _masked_value(row["key"], row["value"])} for row in values]
    probes = _run_probes(config, probe_timeout) if probe else []
    failed = [result for result in probes if result["status"] != "ok"]
    if as_json:
        echo_json(
            {
                "files": files,
                "values": values,
                **({"check": "ok"} if check else {}),
                **({"probes": probes} if probe else {}),
            }
        )
        if failed:
            click.get_current_context().exit(EXIT_PROBE_FAILED)
        return
    if files:
        click.echo("read: " + ", ".join(files))
    else:
        click.echo(
            f"no pai.toml or pyproject.toml with [tool.pai] found in {Path.cwd()} or above; "
            "defaults apply"
        )
    if values:
        echo_table(
            [{**row, "value": _config_value(row["value"])} for row in values],
            [("key", "Key"), ("value", "Value"), ("source", "Source")],
        )
    else:
        click.echo("no settings (every capability uses its default)")
    if check:
        click.echo("check: the configuration is valid")
    if probe:
        _echo_probes(probes)
        if failed:
            click.echo(
                f"Error: {len(failed)} of {len(probes)} probe(s) failed: "
                + ", ".join(str(result["name"]) for result in failed)
                + "; fix what each says above, then run pai config --check --probe again",
                err=True,
            )
            click.get_current_context().exit(EXIT_PROBE_FAILED)


def _masked_value(key: str, value: object) -> object:
    from pai.core._secrets import mask_value

    return mask_value(key.rpartition(".")[2], value)


def _masked_message(text: str) -> str:
    """``text`` with secrets masked: values the configuration holds at secret keys, URL
    passwords, secret-looking environment variables and token-shaped words."""
    from pai.core._config import load_config
    from pai.core._secrets import config_secrets, mask_text

    try:
        secrets = config_secrets(load_config().data)
    except (PaiError, OSError):  # a configuration that cannot be read: no secret to look for
        secrets = []
    return mask_text(text, secrets)


_ERROR_KEY = re.compile(
    r"(?:\[|\b)((?:tool\.pai\.)?(?:capabilities|chat|model|storage)(?:\.[\w\"-]+)*)"
    r"|configuration table \[([^\]\s]+)\]"
)


_ASSIGNED = re.compile(r" *=")


def _error_key(error: PaiError, message: str) -> str | None:
    """The configuration key an error is about: the first one its message names, or the table
    of the capability it names; ``None`` when it names none."""
    matches = list(_ERROR_KEY.finditer(message))
    assigned = [m for m in matches if _ASSIGNED.match(message, m.end())]
    found = (assigned or matches or [None])[0]
    if found is not None:
        key = found[1] or found[2]
        return key.removeprefix("tool.pai.")
    ids: Sequence[str] = getattr(error, "ids", ())
    return f"capabilities.{ids[0]}" if ids else None


def _echo_json_error(error: PaiError, config: PaiConfig | None, *, check: bool) -> NoReturn:
    """Print ``error`` as JSON on stdout (for ``--json``) and exit with :data:`EXIT_USAGE`."""
    from pai.core._config import config_file

    message = _masked_message(str(error))
    if config is not None:
        files = [str(path) for path in config.files]
    else:
        try:
            found = config_file()
        except OSError:
            found = None
        files = [str(found)] if found is not None else []
    echo_json(
        {
            "files": files,
            **({"check": "failed"} if check else {}),
            "error": {
                "message": message,
                "type": type(error).__name__,
                "key": _error_key(error, message),
                "file": files[0] if files else None,
            },
        }
    )
    click.get_current_context().exit(EXIT_USAGE)


def _run_probes(config: PaiConfig, timeout: float) -> list[dict[str, object]]:
    import anyio

    from pai.core._plugins import get_plugins
    from pai.core._probes import collect_probes, run_probes
    from pai.core._secrets import config_secrets

    probes = collect_probes(config, plugins=get_plugins())
    results = anyio.run(
        lambda: run_probes(probes, timeout=timeout, secrets=config_secrets(config.data))
    )
    return [
        {
            "name": result.name,
            "status": result.status,
            "seconds": result.seconds,
            "error": result.error,
        }
        for result in results
    ]


def _echo_probes(probes: Sequence[Mapping[str, object]]) -> None:
    if not probes:
        click.echo("probe: nothing configured to probe (no [model], no probing plugin)")
        return
    for result in probes:
        if result["status"] == "ok":
            click.echo(f"probe {result['name']}: ok ({result['seconds']} s)")
        else:
            click.echo(f"probe {result['name']}: FAILED: {result['error']}")


# -- pai generate ---------------------------------------------------------------------------------

_KNOWN_GENERATORS = {"skills": "pai-skills"}
"""Generators this project publishes: subcommand name -> the distribution that adds it."""


_GENERATE_HELP = """Generate code from your project (typed modules for skills, ...).

Installed plugins add the generators (pai-skills adds `pai generate skills`); without a
subcommand, lists the installed ones and what to install for the others.
"""


@click.pass_context
def _list_generators(ctx: click.Context, as_json: bool) -> None:
    if ctx.invoked_subcommand is not None:
        return
    group = cast("click.Group", ctx.command)
    rows: list[dict[str, object]] = [
        {"command": f"pai generate {name}", "help": command.get_short_help_str(limit=70)}
        for name, command in sorted(group.commands.items())
    ]
    missing = [
        {"command": f"pai generate {name}", "install": distribution}
        for name, distribution in sorted(_KNOWN_GENERATORS.items())
        if name not in group.commands
    ]
    if as_json:
        echo_json({"generators": rows, "not_installed": missing})
        return
    if rows:
        echo_table(rows, [("command", "Command"), ("help", "What it generates")])
    else:
        click.echo("no generators installed")
    for row in missing:
        note(f"`{row['command']}` needs the {row['install']} package: pip install {row['install']}")


def generate_group(cli: click.Group) -> click.Group:
    """The ``generate`` group of the ``pai`` command tree, for a plugin to add a generator to.

    Call it from a ``pai_cli`` hook with the group the hook received::

        @hookimpl
        def pai_cli(cli: click.Group) -> None:
            generate_group(cli).add_command(my_generator)  # pai generate my-generator

    A group made by :func:`create_cli` always has it; for any other group, an empty ``generate``
    group is added first. Raises :class:`TypeError` when ``cli`` has a ``generate`` command that
    is not a group.
    """
    command = cli.commands.get("generate")
    if command is None:
        command = _new_generate_group()
        cli.add_command(command)
    if not isinstance(command, click.Group):
        raise TypeError(
            f"the command group {cli.name!r} has a 'generate' command that is not a group "
            f"({type(command).__name__}); generators can only be added to a group"
        )
    return command


def _new_generate_group() -> click.Group:
    """A fresh ``generate`` group (one per command tree: plugins' additions stay in their tree)."""
    group = PaiGroup(
        name="generate",
        callback=_list_generators,
        help=_GENERATE_HELP,
        invoke_without_command=True,
    )
    return json_option(group)


# -- the command tree -----------------------------------------------------------------------------

_HELP = """PAI: typed, lifecycle-managed capabilities for AI agents.

Commands come from pai-core and from installed plugins (`pai plugins` lists them). Every
listing takes --json. Configuration: pai.toml (or [tool.pai] in pyproject.toml), see `pai config`.
"""


def create_cli(plugins: Plugins | None = None) -> click.Group:
    """The ``pai`` command group: the core commands plus every plugin's (``pai_cli`` hook).

    ``plugins`` defaults to :func:`~pai.core.ext.get_plugins` (entry points are imported then). A
    plugin whose ``pai_cli`` hook fails is named on stderr and marked failed in ``pai plugins``;
    the other plugins' commands still work.
    """
    cli = PaiGroup(name="pai", help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
    cli = click.version_option(package_name="pai-core", prog_name="pai")(cli)
    cli.add_command(plugins_command)
    cli.add_command(config_command)
    cli.add_command(chat_command)
    from pai.core._cli_threads import threads_group  # it uses this module's helpers

    cli.add_command(threads_group)
    from pai.core._cli_storage import storage_group

    cli.add_command(storage_group)
    from pai.core._cli_runs import runs_group

    cli.add_command(runs_group)
    cli.add_command(_new_generate_group())
    if plugins is None:
        from pai.core._plugins import get_plugins

        plugins = get_plugins()
    for failure in plugins.extend_cli(cli):
        warn(failure)
    return cli


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``pai`` command line (the console script's entry point); exits the process."""
    args = list(argv) if argv is not None else sys.argv[1:]
    if args == ["--version"]:
        # Answered before plugins are loaded: the same line as create_cli's --version option.
        from importlib.metadata import version

        click.echo(f"pai, version {version('pai-core')}")
        sys.exit(0)
    try:
        cli = create_cli()
    except PaiError as error:  # PAI_STRICT_PLUGINS=1 and a broken plugin, say
        click.echo(f"Error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    cli.main(args=list(argv) if argv is not None else None, prog_name="pai")


__all__ = [
    "EXIT_PROBE_FAILED",
    "EXIT_USAGE",
    "PaiCliError",
    "PaiGroup",
    "cell_text",
    "chat_command",
    "config_command",
    "create_cli",
    "echo_json",
    "echo_table",
    "fail",
    "generate_group",
    "import_target",
    "json_option",
    "load_checked_config",
    "main",
    "note",
    "plugins_command",
    "stdin_is_terminal",
    "stdout_is_terminal",
    "warn",
]

if __name__ == "__main__":
    main()
