"""Configuration loading: the settings from files, environment and code, and where each came from.

Where it comes from, lowest precedence first:

1. **A file**: ``pai.toml``, or the ``[tool.pai]`` table of a ``pyproject.toml``, in the working
   directory or the nearest folder above it that has one. In one folder ``pai.toml`` wins over
   ``pyproject.toml``; the search stops at the first file found (a ``pyproject.toml`` without
   ``[tool.pai]`` does not count). ``PAI_CONFIG=path`` names the file instead of searching. The
   tables are ``[capabilities]``, ``[chat]`` (the agent ``pai chat`` talks to, see
   :mod:`pai.core._chat`), ``[durability]`` (see :mod:`pai.core._durability_config`),
   ``[model]`` (see :mod:`pai.core._model_config`) and ``[storage]``;
   another top-level table is an error, and so is a ``[capabilities.<id>]`` no
   installed package registers (checked when configuration binds a capability)::

       [capabilities.sandbox]
       scope = "thread"
       provider = "docker"

       [capabilities.sandbox.docker]
       image = "python:3.12-slim"

   A prefixed capability id is a nested table, ``[capabilities.acme.vault]``, or a quoted key,
   ``[capabilities."acme.vault"]``: one or the other, not both.

2. **Environment variables**: ``PAI_<KEY>__<KEY>__...=<value>`` sets one value. ``__`` separates
   the levels of the key path, and the names are lowercased, so
   ``PAI_CAPABILITIES__SANDBOX__PROVIDER=docker`` sets ``capabilities.sandbox.provider`` and
   ``PAI_CAPABILITIES__ACME__VAULT__URL=https://vault`` sets ``url`` of ``acme.vault`` (into
   whichever of the two forms the file wrote that table in). The value is read as a TOML value
   when it is one (``5``, ``2.5``, ``true``, ``"quoted text"``, ``[1, 2]``, ``{ a = 1 }``) and as
   a plain string otherwise (``docker``). Not configuration: variables without ``__``
   (``PAI_HOME``), and the switches ``PAI_CONFIG``, ``PAI_STRICT_PLUGINS``, ``PAI_LOAD_PLUGINS``
   and ``PAI_REQUIRE_DOCKER``. Keys with uppercase letters cannot be set this way; set those in the
   file or in code.

3. **Code**: ``load_config(overrides={...})``, a nested mapping, on top of everything.

Tables and arrays nest at most :data:`MAX_DEPTH` (32) levels, counting every level of a key path
(``capabilities.sandbox.docker.image`` is 4) and of arrays: deeper input (a hostile
``a = [[[[...]]]]``, a ``PAI_A__B__...`` variable of thousands of segments) is a
:class:`~pai.core.ConfigError` naming the file or variable and the limit, before anything walks it.

:class:`PaiConfig` records where every value came from (``pai config`` shows it). Turning the
settings into capability bindings is :mod:`pai.core._config_binding`'s work.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pai.core._errors import ConfigError

CONFIG_FILE = "pai.toml"
"""The configuration file's name."""

PYPROJECT = "pyproject.toml"
"""The other file configuration is read from, in its ``[tool.pai]`` table."""

ENV_PREFIX = "PAI_"
"""The prefix of configuration variables (``PAI_CAPABILITIES__SANDBOX__PROVIDER``)."""

CONFIG_ENV = "PAI_CONFIG"
"""The variable naming the configuration file to read instead of searching for one."""

NOT_CONFIG = frozenset({"PAI_STRICT_PLUGINS", "PAI_LOAD_PLUGINS", "PAI_REQUIRE_DOCKER", CONFIG_ENV})
"""``PAI_`` variables that are switches, not configuration."""

TABLES = ("capabilities", "chat", "durability", "model", "serve", "storage")
"""The top-level tables of the configuration; anything else is a mistake, reported."""

MAX_DEPTH = 32
"""How many levels configuration may nest: key path levels and arrays together."""

KeyPath = tuple[str, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class PaiConfig:
    """The resolved configuration tree and where each value came from.

    ``data`` is the merged tree (``{"capabilities": {"sandbox": {"provider": "docker", ...}}}``);
    ``sources`` maps each leaf's key path to its origin: ``"<file path>"``, ``"env PAI_..."``,
    ``"code"`` or ``"default"``; ``files`` are the files read, nearest first.
    """

    data: Mapping[str, Any] = field(default_factory=dict[str, Any])
    sources: Mapping[tuple[str, ...], str] = field(default_factory=dict[tuple[str, ...], str])
    files: tuple[Path, ...] = ()

    def capability(self, capability_id: str) -> Mapping[str, Any] | None:
        """The section of one capability (``acme.vault`` is ``[capabilities.acme.vault]`` or
        ``[capabilities."acme.vault"]``), or ``None`` when the configuration has none."""
        found = capability_section(self, capability_id)
        return None if found is None else found[1]

    def origin(self, *path: str) -> str:
        """Where the value at ``path`` came from, for messages: ``"pai.toml"``, ``"environment
        variable PAI_SERVE__PORT"``... (``config.origin("serve", "port")``)."""
        return origin_of(self, tuple(path))

    def flat(self) -> list[tuple[str, Any, str]]:
        """Every leaf as ``(dotted key, value, source)``, sorted by key (for ``pai config``)."""
        rows = [
            (render_key(path), value, self.sources.get(path, "default"))
            for path, value in _leaves(self.data, ())
        ]
        return sorted(rows, key=lambda row: row[0])


def capability_section(
    config: PaiConfig, capability_id: str
) -> tuple[KeyPath, Mapping[str, Any]] | None:
    """The key path of a capability's table, and the table; ``None`` when it has none."""
    capabilities = config.data.get("capabilities", _MISSING)
    if capabilities is _MISSING:
        return None
    if not isinstance(capabilities, Mapping):
        raise ConfigError(
            f"capabilities = {_shown('capabilities', capabilities)!r} "
            f"({origin_of(config, ('capabilities',))}) is not a "
            "table; write one table per capability, such as [capabilities.sandbox]"
        )
    parts = tuple(capability_id.split("."))
    candidates: list[KeyPath] = [("capabilities", *parts)]
    if len(parts) > 1:
        candidates.append(("capabilities", capability_id))
    found = [
        (path, value)
        for path in candidates
        if (value := _lookup(config.data, path)) is not _MISSING
    ]
    if not found:
        return None
    if len(found) > 1:
        (nested, _), (quoted, _) = found
        raise ConfigError(
            f"capability {capability_id!r} is configured twice: as [{render_key(nested)}] "
            f"({origin_of(config, nested)}) and as [{render_key(quoted)}] "
            f"({origin_of(config, quoted)}); merge them into one table, in one of the two forms",
            ids=(capability_id,),
        )
    path, value = found[0]
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{render_key(path)} = {_shown(path[-1], value)!r} ({origin_of(config, path)}) "
            "is not a table; "
            f"configure capability {capability_id!r} as a table: [capabilities.{capability_id}]",
            ids=(capability_id,),
        )
    return path, cast("Mapping[str, Any]", value)


def _shown(key: str, value: object) -> object:
    """``value`` as a message may quote it (secrets masked); imported on error paths only."""
    from pai.core._secrets import mask_value

    return mask_value(key, value)


def origin_of(config: PaiConfig, path: KeyPath) -> str:
    """Where the value at ``path`` (or the values of the table there) came from, for messages.

    For a key that is not set: where its table's values came from, or the file read.
    """
    exact = config.sources.get(path)
    if exact is not None:
        return describe_source(exact)
    for size in range(len(path), 0, -1):
        prefix = path[:size]
        below = sorted({src for key, src in config.sources.items() if key[:size] == prefix})
        if below:
            return ", ".join(describe_source(source) for source in below)
    if config.files:
        return describe_source(str(config.files[0]))
    return "not configured"


def render_key(path: Sequence[str]) -> str:
    """A key path as TOML writes it: ``capabilities."acme.vault".url``."""
    return ".".join(part if _BARE_KEY.fullmatch(part) else json.dumps(part) for part in path)


def describe_source(source: str) -> str:
    """A value's source (as :attr:`PaiConfig.sources` records it) for a person to read."""
    if source.startswith("env "):
        return f"environment variable {source[4:]}"
    if source == "code":
        return "code (load_config overrides=)"
    if source == "default":
        return "the defaults"
    if Path(source).name == PYPROJECT:
        return f"{source} [tool.pai]"
    return source


def source_folder(source: str | None) -> Path | None:
    """The folder of the file a value's ``source`` names (relative paths in that file are read
    from there), or ``None`` for a value from the environment, code or the defaults."""
    if source is None or source.startswith("env ") or source in ("code", "default"):
        return None
    return Path(source).parent


def load_config(
    start: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> PaiConfig:
    """Read ``pai.toml`` or ``[tool.pai]`` of ``pyproject.toml``, searching from ``start`` (the
    working directory) upward; apply ``PAI_*`` environment overrides
    (``PAI_CAPABILITIES__SANDBOX__PROVIDER=docker``) and then ``overrides`` from code."""
    data: dict[str, Any] = {}
    sources: dict[KeyPath, str] = {}
    files: list[Path] = []
    env = os.environ if environ is None else environ
    chosen = env.get(CONFIG_ENV)
    if chosen:
        found = _named_file(Path(chosen))
    else:
        found = _find_file(_working_directory() if start is None else Path(start))
    if found is not None:
        path, table = found
        files.append(path)
        data = table
        sources.update((key, str(path)) for key, _ in _leaves(table, ()))
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in NOT_CONFIG:
            continue
        rest = name[len(ENV_PREFIX) :]
        if "__" not in rest:
            continue
        where = f"environment variable {_env_name(name)}"
        segments = tuple(rest.lower().split("__"))
        if not all(segments):
            raise ConfigError(
                f"{where} has an empty key between its '__' separators; "
                "write PAI_<KEY>__<KEY>..., e.g. PAI_CAPABILITIES__SANDBOX__PROVIDER=docker, "
                "or unset it"
            )
        levels = sum(len(segment.split(".")) for segment in segments)
        if levels > MAX_DEPTH:
            raise ConfigError(
                f"{where} names a key {levels} levels deep (its '__' and '.' separators); "
                f"configuration nests at most {MAX_DEPTH} levels. Unset it, or set a real key "
                "such as PAI_CAPABILITIES__SANDBOX__PROVIDER"
            )
        value = _env_value(env[name], where)
        _check_depth(value, where, levels, segments)
        for key, leaf in _flatten(segments, value, where):
            _assign(data, sources, key, leaf, f"env {name}")
    if overrides:
        where = "load_config(overrides=...)"
        _check_depth(overrides, where, 0)
        for key, leaf in _flatten((), overrides, where):
            _assign(data, sources, key, leaf, "code")
    config = PaiConfig(data=data, sources=sources, files=tuple(files))
    _check_tables(config)
    return config


def _working_directory() -> Path:
    """The working directory, or a :class:`ConfigError` when it is gone (deleted under us)."""
    try:
        return Path.cwd()
    except OSError as error:
        raise ConfigError(
            f"cannot search for {CONFIG_FILE} from the working directory: {error.strerror or error} "
            "(was the folder deleted?); cd to your project's folder, or name the file with "
            f"{CONFIG_ENV}=path/to/{CONFIG_FILE}"
        ) from None


def config_file(
    start: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The file :func:`load_config` reads (``PAI_CONFIG``'s, or the nearest ``pai.toml`` or
    ``pyproject.toml`` with ``[tool.pai]``), or ``None``; never raises for a broken file, so an
    error report can name the file that is broken."""
    env = os.environ if environ is None else environ
    chosen = env.get(CONFIG_ENV)
    if chosen:
        path = Path(chosen)
        return path.resolve() if path.is_file() else None
    try:
        begin = (Path.cwd() if start is None else Path(start)).resolve()
    except OSError:
        return None
    folder = begin if begin.is_dir() else begin.parent
    for directory in (folder, *folder.parents):
        if (directory / CONFIG_FILE).is_file():
            return directory / CONFIG_FILE
        candidate = directory / PYPROJECT
        if candidate.is_file():
            try:
                if _tool_pai(candidate) is not None:
                    return candidate
            except ConfigError:
                return candidate  # a broken [tool.pai]: this is the file the error is about
    return None


def did_you_mean(
    value: str,
    choices: Iterable[str],
    *,
    before: str = "",
    after: str = " ",
    show: Callable[[str], str] = repr,
) -> str:
    """The hint ``did you mean 'x'?`` for the choice closest to ``value``, or ``""``.

    Every "did you mean" of pai-core is made here, in one shape, and plugins can use it for
    theirs: the hint ends in its question mark, and the caller's separators go around it
    (``before``, and ``after``, which by default is the space before the next clause), never a
    full stop after it. ``show`` renders the choice. ``value`` itself is never suggested (a
    choice that is known but not installed must be explained, not offered back).

    Example::

        from pai.core.ext import did_you_mean

        f"unknown table [{key}]; {did_you_mean(key, TABLES)}the tables are: ..."
        "unknown key" + did_you_mean(key, fields, before="; ", after="")
    """
    import difflib  # only on error paths

    close = difflib.get_close_matches(value, sorted(set(choices) - {value}), n=1)
    return f"{before}did you mean {show(close[0])}?{after}" if close else ""


def _check_tables(config: PaiConfig) -> None:
    """Every top-level key is a known table: a misspelt one must not be silently ignored."""
    for key in sorted(config.data):
        if key in TABLES:
            continue
        raise ConfigError(
            f"unknown configuration table [{render_key((key,))}] ({origin_of(config, (key,))}); "
            f"{did_you_mean(key, TABLES)}the tables are: "
            f"{', '.join(f'[{table}]' for table in TABLES)}"
        )


def check_capability_ids(config: PaiConfig, known: Collection[str]) -> None:
    """Every ``[capabilities.<id>]`` names a capability some installed package registers.

    A nested table is read as a prefixed id (``[capabilities.acme.vault]``) as far as a known id
    needs it; the tables below a known id are its own (``[capabilities.sandbox.docker]``).
    """
    capabilities = config.data.get("capabilities")
    if not isinstance(capabilities, Mapping):
        return
    ids = set(known)

    def walk(table: Mapping[str, Any], prefix: str) -> None:
        for key, value in table.items():
            cap_id = f"{prefix}{key}"
            if cap_id in ids:
                continue
            if isinstance(value, Mapping) and any(i.startswith(cap_id + ".") for i in ids):
                walk(cast("Mapping[str, Any]", value), cap_id + ".")
                continue
            path: KeyPath = ("capabilities", *[p for p in prefix.split(".") if p], key)
            raise ConfigError(
                f"[capabilities.{cap_id}] ({origin_of(config, path)}) configures a capability no "
                f"installed package provides; {did_you_mean(cap_id, ids)}installed capability "
                f"ids: {', '.join(sorted(ids)) or 'none'}. Fix the id, install the package that "
                "provides it, or remove the table",
                ids=(cap_id,),
            )

    walk(cast("Mapping[str, Any]", capabilities), "")


# -- reading and merging -------------------------------------------------------------------------


def _find_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for directory in (folder, *folder.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file():
            return candidate, _read_toml(candidate)
        candidate = directory / PYPROJECT
        if candidate.is_file():
            table = _tool_pai(candidate)
            if table is not None:
                return candidate, table
    return None


def _named_file(path: Path) -> tuple[Path, dict[str, Any]]:
    """The file ``PAI_CONFIG`` names: a ``pai.toml``-shaped file, or a ``pyproject.toml``."""
    if not path.is_file():
        raise ConfigError(
            f"{CONFIG_ENV}={str(path)!r} names no file; point it at your pai.toml (or a "
            f"pyproject.toml with [tool.pai]), or unset {CONFIG_ENV} to search from the working "
            "directory upward"
        )
    path = path.resolve()
    if path.name == PYPROJECT:
        table = _tool_pai(path)
        if table is None:
            raise ConfigError(
                f"{CONFIG_ENV}={str(path)!r} is a pyproject.toml without a [tool.pai] table; "
                "add one, or point the variable at a pai.toml"
            )
        return path, table
    return path, _read_toml(path)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"cannot read the configuration file {path}: {error}; make it a readable UTF-8 "
            "TOML file, or remove it"
        ) from error


def _too_deep(where: str) -> str:
    """The message for TOML nested too deeply for :mod:`tomllib` (it recurses per level)."""
    return (
        f"{where} nests tables or arrays too deeply for the TOML reader to follow; "
        f"configuration nests at most {MAX_DEPTH} levels (keys and arrays counted together): "
        "flatten it"
    )


def _env_name(name: str) -> str:
    """A ``PAI_*`` variable's name for a message, shortened when it is absurdly long."""
    if len(name) <= 100:
        return name
    return f"{name[:60]}...{name[-20:]} ({len(name):,} characters)"


def _read_toml(path: Path, text: str | None = None) -> dict[str, Any]:
    try:
        table = tomllib.loads(_read_text(path) if text is None else text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"the configuration file {path} is not valid TOML: {error}. Fix that line "
            "(see https://toml.io), or remove the file"
        ) from error
    except RecursionError:  # tomllib recurses once per level of nesting
        raise ConfigError(
            _too_deep(f"the configuration file {path}") + ", or remove the file"
        ) from None
    if path.name != PYPROJECT:
        _check_depth(table, f"the configuration file {path}", 0)
    return table


def _tool_pai(path: Path) -> dict[str, Any] | None:
    text = _read_text(path)
    try:
        document = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        if not re.search(r"\bpai\b", text):
            return None  # a broken pyproject.toml that holds no PAI configuration: not ours
        return _read_toml(path, text)  # raises the error, naming the file
    tool = document.get("tool")
    if not isinstance(tool, dict) or "pai" not in tool:
        return None
    table = cast("dict[str, Any]", tool)["pai"]
    if not isinstance(table, dict):
        raise ConfigError(
            f"tool.pai = {_shown('pai', table)!r} in {path} is not a table; write "
            "[tool.pai.capabilities.<id>] "
            "tables, or move the configuration to pai.toml"
        )
    pai = cast("dict[str, Any]", table)
    _check_depth(pai, f"{path} [tool.pai]", 0)
    return pai


def _env_value(raw: str, where: str) -> object:
    """``raw`` as a TOML value when it is one (``5``, ``true``, ``"x"``), else the string."""
    try:
        parsed = tomllib.loads(f"value = {raw}")
    except tomllib.TOMLDecodeError:
        return raw
    except RecursionError:  # the value is never shown: it may be a secret
        raise ConfigError(_too_deep(f"the value of {where}") + ", or unset it") from None
    return parsed["value"] if parsed.keys() == {"value"} else raw


def _show_path(path: Sequence[str | int]) -> str:
    """A key path with array indices (``capabilities.x[0][1]``), shortened in the middle."""
    parts = [f"[{part}]" if isinstance(part, int) else f".{render_key((part,))}" for part in path]
    if len(parts) > 10:
        parts = [*parts[:6], "...", *parts[-2:]]
    return "".join(parts).lstrip(".") or "the top level"


def _check_depth(value: object, where: str, levels: int, prefix: tuple[str, ...] = ()) -> None:
    """Raise a :class:`ConfigError` when ``value`` (at key path ``prefix``, ``levels`` deep
    already) nests tables and arrays deeper than :data:`MAX_DEPTH`. Iterative, so no input can
    exhaust the stack; a mapping that contains itself is too deep too."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Mapping):
            children: Iterable[tuple[str | int, object]] = (
                (str(key), item) for key, item in cast("Mapping[object, object]", node).items()
            )
        elif isinstance(node, list | tuple):
            children = enumerate(cast("Sequence[object]", node))
        else:
            continue
        for key, child in children:
            if levels + len(path) + 1 > MAX_DEPTH:
                raise ConfigError(
                    f"{where} nests tables and arrays more than {MAX_DEPTH} levels deep (at "
                    f"{_show_path((*prefix, *path, key))}, level {levels + len(path) + 1}); "
                    "configuration "
                    f"nests at most {MAX_DEPTH} levels (keys and arrays counted together): "
                    "flatten it"
                )
            stack.append((child, (*path, key)))


def _lookup(tree: Mapping[str, Any], path: KeyPath) -> Any:
    node: Any = tree
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = cast("Mapping[str, Any]", node)[part]
    return node


def _leaves(tree: Mapping[str, Any], prefix: KeyPath) -> Iterator[tuple[KeyPath, Any]]:
    """Every leaf under ``tree`` in order, depth first (iterative: no recursion limit)."""
    stack: list[tuple[KeyPath, Iterator[tuple[str, Any]]]] = [(prefix, iter(tree.items()))]
    while stack:
        path, items = stack[-1]
        for key, value in items:
            if isinstance(value, Mapping):
                stack.append(((*path, key), iter(cast("Mapping[str, Any]", value).items())))
                break
            yield (*path, key), value
        else:
            stack.pop()


def _flatten(prefix: KeyPath, value: object, where: str) -> Iterator[tuple[KeyPath, object]]:
    """Leaves of ``value`` under ``prefix``; an empty mapping is a leaf (an empty table).
    Iterative, in order, depth first."""
    stack: list[tuple[KeyPath, Iterator[tuple[object, object]]]] = []

    def visit(path: KeyPath, item: object) -> tuple[KeyPath, object] | None:
        if not isinstance(item, Mapping):
            return path, item
        table = cast("Mapping[object, object]", item)
        if not table:
            return path, table
        stack.append((path, iter(table.items())))
        return None

    leaf = visit(prefix, value)
    if leaf is not None:
        yield leaf
    while stack:
        path, items = stack[-1]
        for key, item in items:
            if not isinstance(key, str) or not key:
                raise ConfigError(
                    f"{where} has the key {key!r} under {render_key(path) or 'the top level'}; "
                    "configuration keys are non-empty strings"
                )
            leaf = visit((*path, key), item)
            if leaf is None:
                break
            yield leaf
        else:
            stack.pop()


def _step(node: Mapping[str, Any], segments: Sequence[str]) -> tuple[str, list[str]]:
    """The key at this level for ``segments``, and the segments left below it.

    A dotted id may be a nested table or a quoted key, so the longest run of the remaining parts
    that names an existing key wins (``acme.vault`` finds ``"acme.vault"`` or ``acme``);
    otherwise the next segment, as given, is the key.
    """
    parts = [part for segment in segments for part in segment.split(".")]
    for size in range(len(parts), 0, -1):
        key = ".".join(parts[:size])
        if key in node and (size == len(parts) or isinstance(node[key], Mapping)):
            return key, _drop_parts(segments, size)
    return segments[0], list(segments[1:])


def _drop_parts(segments: Sequence[str], count: int) -> list[str]:
    rest = list(segments)
    while count:
        parts = rest[0].split(".")
        if len(parts) <= count:
            count -= len(parts)
            rest.pop(0)
        else:
            rest[0] = ".".join(parts[count:])
            count = 0
    return rest


def _forget(sources: dict[KeyPath, str], path: KeyPath) -> None:
    for key in [key for key in sources if key[: len(path)] == path]:
        del sources[key]


def _assign(
    tree: dict[str, Any],
    sources: dict[KeyPath, str],
    segments: Sequence[str],
    value: object,
    source: str,
) -> None:
    """Set one leaf (or create an empty table), recording its source."""
    node = tree
    path: list[str] = []
    remaining = list(segments)
    while True:
        key, remaining = _step(node, remaining)
        path.append(key)
        current = node.get(key, _MISSING)
        if not remaining:
            break
        if not isinstance(current, dict):
            _forget(sources, tuple(path))  # a value becomes a table
            current = node[key] = {}
        node = cast("dict[str, Any]", current)
    if isinstance(value, Mapping):  # an empty table
        if not isinstance(current, dict):
            _forget(sources, tuple(path))
            node[key] = {}
        return
    _forget(sources, tuple(path))
    node[key] = value
    sources[tuple(path)] = source


__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "ENV_PREFIX",
    "MAX_DEPTH",
    "NOT_CONFIG",
    "PYPROJECT",
    "TABLES",
    "KeyPath",
    "PaiConfig",
    "capability_section",
    "check_capability_ids",
    "config_file",
    "describe_source",
    "load_config",
    "origin_of",
    "render_key",
]
