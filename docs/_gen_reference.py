"""The configuration and CLI reference pages, generated from the code so they cannot drift.

An mkdocs hook (``hooks:`` in mkdocs.yml): :func:`on_page_markdown` replaces the marker line
``<!-- generated: config -->`` with :func:`config_reference` and ``<!-- generated: cli -->`` with
:func:`cli_reference`. Both read what is installed the way the runtime does: registrations come
from the plugins of the ``pai`` entry-point group (``get_plugins()``), the command line from
``create_cli()``, so a new provider, model, engine or command appears without touching the docs.

The output is ordinary markdown, so ``mkdocs build --strict`` checks it. Nothing here imports
mkdocs: tests/docs/test_generated_reference.py imports this module where mkdocs is not installed.

Core tables that are not pydantic models (``[storage]``, ``[model]``, ``[chat]``, ``[durability]``,
``[serve]``) take their key names from the constants the code checks them against; the short
descriptions of those keys live below, and a key without one stops the build
(:class:`GenerationError`), so a new key cannot go undocumented.
"""

from __future__ import annotations

import ast
import enum
import html
import importlib
import inspect
import itertools
import json
import math
import re
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, cast, get_args, get_origin

if TYPE_CHECKING:
    import click
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

MARKER = re.compile(r"^<!--\s*generated:\s*(?P<name>[\w-]+)\s*-->[ \t]*$", re.MULTILINE)
"""The line a page holds where generated markdown goes: ``<!-- generated: config -->``."""


class GenerationError(RuntimeError):
    """The reference cannot be generated (a key without a description, an unknown marker)."""


# -- keys of the core's tables that no options model describes --------------------------------

_TABLES: Mapping[str, str] = {
    "capabilities": "one table per capability (`[capabilities.<id>]`), and sub-tables the "
    "capability reads (a sandbox provider's options: `[capabilities.sandbox.<provider>]`)",
    "chat": "the agent `pai chat` talks to when it is given none",
    "durability": "the engine that makes runs durable, and its options",
    "model": "the model of agents defined without one, and each model provider's options",
    "serve": "what `pai serve` serves and how (read by pai-http)",
    "storage": "where threads and runs are stored, and how runs share threads",
}

_STORAGE_KEYS: Mapping[str, tuple[str, str]] = {
    "url": (
        "str",
        "storage URL; its scheme picks the backend (see the table below); a relative SQLite "
        "path is taken from the configuration file's folder. Unset: storage is in memory",
    ),
    "run_lease_ttl": (
        "float",
        "seconds a run's lease on its thread lasts unless renewed (every third of it); a run "
        "that stalls longer loses its thread to another",
    ),
    "busy_thread_wait": (
        "float",
        "seconds a run waits for a thread another run holds, before ThreadBusyError",
    ),
}

_MODEL_KEYS: Mapping[str, tuple[str, str]] = {
    "provider": ("str", "the model provider: a name some installed package registers"),
    "name": ("str", "the provider's name for the model, such as `gpt-4.1-mini`"),
}

_CHAT_KEYS: Mapping[str, tuple[str, str]] = {
    "agent": (
        "str",
        'the agent `pai chat` talks to without an argument: `"<module>:<attribute>"`',
    ),
}

_DURABILITY_KEYS: Mapping[str, tuple[str, str]] = {
    "engine": ("str", "the durability engine: a name some installed package registers"),
}

_SERVE_KEYS: Mapping[str, tuple[str, str]] = {
    "host": ("str", "address to bind (`pai serve --host`); default 127.0.0.1"),
    "port": ("int", "port (`pai serve --port`); default 8000"),
    "workers": ("int", "worker processes (`pai serve --workers`); default 1"),
    "auth": ("str", "`MODULE:FUNCTION` authenticating each request (`pai serve --auth`)"),
    "cors_origins": ("list[str]", "origins a browser may call the server from"),
    "chat_page": ("bool", "serve the chat page at `/` (`pai serve --no-page` turns it off)"),
    "target": ("str", "`MODULE:ATTR` naming the `create_pai(...)` app `pai serve` serves"),
}


# -- markdown helpers -----------------------------------------------------------------------------


def code(text: str) -> str:
    """``text`` as inline code that is safe in a table cell (``|`` would end the cell)."""
    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


_CODE_SPAN = re.compile(r"(`[^`\n]+`)")
_SPECIAL = re.compile(r"([\\*_\[\]<>&|])")


def prose(text: str) -> str:
    """Plain text as markdown: backtick spans kept as code, everything else escaped (``<``,
    ``*``, ``_``, ``[``, ``|``...), lines joined (a cell holds one line)."""
    text = " ".join(text.split())
    parts: list[str] = []
    for index, piece in enumerate(_CODE_SPAN.split(text)):
        if index % 2:
            parts.append(code(piece[1:-1]))
        else:
            parts.append(
                _SPECIAL.sub(
                    lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(
                        m.group(1), "\\" + m.group(1)
                    ),
                    piece,
                )
            )
    return "".join(parts)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table; cells are markdown already (made with :func:`code` and :func:`prose`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell or "—" for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def toml_block(text: str) -> str:
    return f"```toml\n{text.rstrip()}\n```"


# -- rendering pydantic fields --------------------------------------------------------------------


def _name_of(annotation: object) -> str:
    if annotation is type(None) or annotation is None:
        return "None"
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def type_text(annotation: object) -> str:
    """An annotation as a reader writes it: ``int | None``, ``"user" | "root"``,
    ``dict[str, str]``, ``float (> 0)``; ``Annotated`` constraints in brackets."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _with_constraints(type_text(args[0]), args[1:])
    if origin is Union or origin is types.UnionType:
        return " | ".join(type_text(arg) for arg in args)
    if origin is Literal:
        return " | ".join(toml_value(arg) or repr(arg) for arg in args)
    if origin is not None:
        name = _name_of(origin)
        return f"{name}[{', '.join(type_text(arg) for arg in args)}]" if args else name
    return _name_of(annotation)


_BOUNDS = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))
_LENGTHS = (("min_length", "length ≥"), ("max_length", "length ≤"))


def constraints(metadata: Iterable[object]) -> list[str]:
    """``["> 0", "length ≤ 64"]`` from pydantic / annotated-types constraint objects."""
    found: list[str] = []
    for item in metadata:
        for attribute, sign in (*_BOUNDS, *_LENGTHS):
            value = getattr(item, attribute, None)
            if value is not None and not callable(value):
                found.append(f"{sign} {value}")
    return found


def _with_constraints(text: str, metadata: Iterable[object]) -> str:
    found = constraints(metadata)
    return f"{text} ({', '.join(found)})" if found else text


def toml_value(value: object) -> str | None:
    """``value`` as a TOML literal, or ``None`` when TOML cannot write it (``None`` itself)."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, PurePath):
        value = str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple | set | frozenset):
        items = [toml_value(item) for item in cast("Iterable[object]", value)]
        return None if None in items else "[" + ", ".join(cast("list[str]", items)) + "]"
    if isinstance(value, Mapping):
        pairs: list[str] = []
        for key, item in cast("Mapping[object, object]", value).items():
            literal = toml_value(item)
            if literal is None:
                return None
            pairs.append(f"{_toml_key(str(key))} = {literal}")
        return "{" + ", ".join(pairs) + "}" if pairs else "{}"
    return None


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _secret_key(name: str) -> bool:
    """Whether the runtime treats a key of this name as a secret (it masks its value)."""
    try:
        from pai.core._secrets import secret_key
    except ImportError:  # moved: fall back on the names it masks
        return re.search(r"key|token|secret|password", name, re.I) is not None and not (
            name.endswith("_env")
        )
    return secret_key(name)


def _is_secret(name: str, field: FieldInfo) -> bool:
    return "Secret" in type_text(field.annotation) or _secret_key(name)


_NO_DEFAULT = object()


def default_of(field: FieldInfo) -> object:
    """The field's default value (its factory called), or ``_NO_DEFAULT`` when it is required
    or computed from the other values."""
    if field.is_required():
        return _NO_DEFAULT
    factory = field.default_factory
    if factory is not None:
        # An empty container is shown; another factory (a host name, say) would show the value
        # on the machine that built the docs, so it is "computed" (its description says how).
        if (get_origin(factory) or factory) in (dict, list, set, tuple, frozenset):
            return cast("Callable[[], object]", factory)()
        return _NO_DEFAULT
    return field.default


def _rst(text: str) -> str:
    """reStructuredText markup of a docstring as markdown: ``x`` and :class:`~a.B` -> `x`, `B`."""
    text = re.sub(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _attribute_docstrings(model: type) -> dict[str, str]:
    """``field: int = 1`` followed by a string: that string, by field, for ``model`` and its bases
    (what pydantic's ``use_attribute_docstrings`` reads)."""
    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        try:
            tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for before, after in itertools.pairwise(body):
            if (
                isinstance(before, ast.AnnAssign)
                and isinstance(before.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[before.target.id] = inspect.cleandoc(after.value.value)
    return found


def descriptions(model: type[BaseModel]) -> dict[str, str]:
    """Each field's description: ``Field(description=...)``, else its attribute docstring, else
    the paragraph of the class docstring that starts with the field's name."""
    attributes = _attribute_docstrings(model)
    paragraphs = [
        " ".join(p.split()) for p in re.split(r"\n\s*\n", inspect.cleandoc(model.__doc__ or ""))
    ]
    found: dict[str, str] = {}
    for name, field in model.model_fields.items():
        text = field.description or attributes.get(name)
        if not text:
            text = next((p for p in paragraphs if p.startswith(f"``{name}``")), "")
        found[name] = _rst(text)
    return found


def public_name(model: type) -> str:
    """``pai.sandbox_local.LocalOptions`` when the package exports it, else where it is defined."""
    package = re.sub(r"(\._[^.]*)+$", "", model.__module__)
    try:
        exported = getattr(importlib.import_module(package), model.__qualname__, None)
    except ImportError:
        exported = None
    module = package if exported is model else model.__module__
    return f"{module}.{model.__qualname__}"


def default_text(name: str, field: FieldInfo) -> str:
    """The default column: ``512``, ``unset (None)``, *required*, or nothing for a secret."""
    if field.is_required():
        return "*required*"
    if _is_secret(name, field):
        return "*not shown (secret)*"
    value = default_of(field)
    if value is _NO_DEFAULT:
        return "*computed*"
    if value is None:
        return "unset (" + code("None") + ")"
    literal = toml_value(value)
    return code(literal if literal is not None else repr(value))


def options_section(
    header: str,
    model: type[BaseModel],
    *,
    heading: str,
    description: str,
    distribution: str,
    prelude: Mapping[str, object] | None = None,
    level: int = 3,
) -> str:
    """One table of configuration: its TOML header, what provides it, key | type | default |
    description, and an example with every default written out (unset keys commented)."""
    out = [
        f"{'#' * level} {heading}",
        "",
        f"{code(header)} — provided by **{distribution}**"
        f" (options model {code(public_name(model))})",
        "",
    ]
    if description:
        out += [prose(description), ""]
    fields = model.model_fields
    described = descriptions(model)
    if fields:
        rows = [
            [
                code(name),
                code(_with_constraints(type_text(field.annotation), field.metadata)),
                default_text(name, field),
                prose(described[name]),
            ]
            for name, field in fields.items()
        ]
        out += [table(["Key", "Type", "Default", "Description"], rows), ""]
    else:
        out += ["This table takes no keys.", ""]
    example = [header]
    example += [f"{_toml_key(key)} = {value}" for key, value in (prelude or {}).items()]
    for name, field in fields.items():
        example.append(_example_line(name, field))
    out += [toml_block("\n".join(example)), ""]
    return "\n".join(out)


def _example_line(name: str, field: FieldInfo) -> str:
    key = _toml_key(name)
    if field.is_required():
        return f"# {key} = ...  # required"
    if _is_secret(name, field):
        return f"# {key} = ...  # a secret: prefer the environment variable"
    value = default_of(field)
    if value is None:
        return f"# {key} = ...  # unset by default"
    literal = None if value is _NO_DEFAULT else toml_value(value)
    if literal is None:
        return f"# {key} = ...  # computed by default"
    return f"{key} = {literal}"


def keys_section(
    header: str,
    keys: Sequence[str],
    described: Mapping[str, tuple[str, str]],
    *,
    defaults: Mapping[str, object] | None = None,
    what: str,
) -> str:
    """A table of a core table's keys; every key the code accepts must be described here."""
    missing = [key for key in keys if key not in described]
    if missing:
        raise GenerationError(
            f"{header} takes {', '.join(missing)}, which docs/_gen_reference.py does not "
            f"describe ({what}); add them there"
        )
    rows: list[list[str]] = []
    for key in keys:
        kind, text = described[key]
        default = (defaults or {}).get(key)
        literal = None if default is None else toml_value(default)
        rows.append(
            [
                code(key),
                code(kind),
                code(literal) if literal is not None else "unset",
                prose(text),
            ]
        )
    return table(["Key", "Type", "Default", "Description"], rows)


# -- discovering what is installed ----------------------------------------------------------------


def _first(names: Sequence[str], modules: Sequence[str]) -> Any:
    """The first of ``names`` found in the first of ``modules`` that has it (names move between
    public modules; the docs follow them), or ``None``."""
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in names:
            found = getattr(module, name, None)
            if found is not None:
                return found
    return None


def _plugins() -> Any:
    get_plugins = _first(["get_plugins"], ["pai.core", "pai.core.ext"])
    if get_plugins is None:
        raise GenerationError("pai.core.get_plugins not found: is pai-core installed?")
    return get_plugins()


def _sandbox_providers(plugins: Any) -> dict[str, Any]:
    """Every sandbox provider registration, as ``pai.sandbox`` finds them (empty without it)."""
    lookup = _first(["sandbox_providers"], ["pai.sandbox.provider", "pai.sandbox"])
    if lookup is None:
        return {}
    return dict(lookup(plugins))


def _is_model(value: object) -> bool:
    from pydantic import BaseModel

    return isinstance(value, type) and issubclass(value, BaseModel)


def engine_options(registration: Any) -> type[BaseModel] | None:
    """A durability engine's options model: the registration's ``options`` when it has one;
    else the one public ``*Options`` pydantic model of the package whose factory it registers
    (``pai.durable_dbos.DbosOptions``), which the factory validates ``[durability]`` with."""
    declared = getattr(registration, "options", None)
    if _is_model(declared):
        return cast("type[BaseModel]", declared)
    module_name = getattr(registration.factory, "__module__", "") or ""
    package = re.sub(r"(\._[^.]*)+$", "", module_name)
    try:
        module = importlib.import_module(package)
    except ImportError:
        return None
    public = getattr(module, "__all__", [name for name in dir(module) if not name.startswith("_")])
    models = [
        getattr(module, name)
        for name in public
        if name.endswith("Options") and _is_model(getattr(module, name, None))
    ]
    return models[0] if len(models) == 1 else None


# -- the configuration page -----------------------------------------------------------------------


def config_reference() -> str:
    """The configuration reference: every table of ``pai.toml`` and every installed
    registration's options, as markdown."""
    plugins = _plugins()
    core_tables = _first(["TABLES"], ["pai.core._config"]) or tuple(_TABLES)
    out: list[str] = ["## Tables", ""]
    missing = [name for name in core_tables if name not in _TABLES]
    if missing:
        raise GenerationError(
            f"pai.toml has tables {missing} that docs/_gen_reference.py does not describe"
        )
    out += [
        table(
            ["Table", "What it configures"],
            [[code(f"[{name}]"), f"[{prose(_TABLES[name])}](#{name})"] for name in core_tables],
        ),
        "",
    ]
    out += [_capabilities(plugins), _model(plugins), _storage(plugins), _durability(plugins)]
    out += [_chat(), _serve()]
    return "\n".join(out).rstrip() + "\n"


def _capabilities(plugins: Any) -> str:
    out = [
        "## Capabilities { #capabilities }",
        "",
        "One table per installed capability, `[capabilities.<id>]`: its options as its "
        "registration's model validates them (an unknown key is an error), and `scope`.",
        "",
    ]
    scopes = _first(["SCOPE_KINDS"], ["pai.core._scope"])
    if scopes:
        out += [
            "Every capability table also takes `scope`, the binding's scope (how widely one "
            "instance is shared), one of "
            + ", ".join(code(toml_value(s) or s) for s in scopes)
            + "; unset: the capability's default.",
            "",
        ]
    registrations: Mapping[str, Any] = plugins.capabilities()
    for cap_id, registration in sorted(registrations.items()):
        out.append(
            options_section(
                f"[capabilities.{cap_id}]",
                registration.options,
                heading=f"`[capabilities.{cap_id}]`",
                description=registration.description,
                distribution=registration.distribution,
            )
        )
        if cap_id == "sandbox":
            out.append(_sandbox_section(plugins))
    return "\n".join(out)


def _sandbox_section(plugins: Any) -> str:
    providers = _sandbox_providers(plugins)
    out = [
        "### Sandbox providers",
        "",
        '`provider = "<name>"` in `[capabilities.sandbox]` picks one; its options go in '
        "`[capabilities.sandbox.<name>]`. Installed providers: "
        + ", ".join(code(name) for name in sorted(providers))
        + ".",
        "",
    ]
    for name, registration in sorted(providers.items()):
        out.append(
            options_section(
                f"[capabilities.sandbox.{name}]",
                registration.options,
                heading=f"`[capabilities.sandbox.{name}]`",
                description=registration.description,
                distribution=registration.distribution,
                level=4,
            )
        )
    return "\n".join(out)


def _model(plugins: Any) -> str:
    keys = _first(["MODEL_KEYS"], ["pai.core._model_config"]) or tuple(_MODEL_KEYS)
    out = [
        "## Model { #model }",
        "",
        "`[model]` picks the model of every agent defined without one; each provider's options "
        'go in `[model.<provider>]` (`define_agent(model="openai:...")` still takes them '
        "from there).",
        "",
        keys_section("[model]", keys, _MODEL_KEYS, what="MODEL_KEYS"),
        "",
    ]
    registrations: Mapping[str, Any] = plugins.models()
    for name, registration in sorted(registrations.items()):
        out.append(
            options_section(
                f"[model.{name}]",
                registration.options,
                heading=f"`[model.{name}]`",
                description=registration.description,
                distribution=registration.distribution,
            )
        )
    return "\n".join(out)


def _storage(plugins: Any) -> str:
    keys = _first(["STORAGE_KEYS"], ["pai.core._storage_config"]) or tuple(_STORAGE_KEYS)
    defaults = {
        "run_lease_ttl": _first(["RUN_LEASE_TTL"], ["pai.core._storage_config"]),
        "busy_thread_wait": _first(["BUSY_THREAD_WAIT"], ["pai.core._storage_config"]),
    }
    builtin: Mapping[str, Any] = _first(["BUILTIN_BACKENDS"], ["pai.core._storage_config"]) or {}
    backends: dict[str, Any] = {**builtin, **plugins.storage_backends()}
    rows = [
        [code(f"{scheme}://"), prose(registration.description), f"**{registration.distribution}**"]
        for scheme, registration in sorted(backends.items())
    ]
    out = [
        "## Storage { #storage }",
        "",
        "`[storage]` — provided by **pai-core**; storage backends by URL scheme, from pai-core "
        "and from plugins (`pai_storage_backends`).",
        "",
        keys_section("[storage]", keys, _STORAGE_KEYS, defaults=defaults, what="STORAGE_KEYS"),
        "",
        "### Storage backends",
        "",
        table(["URL scheme", "Backend", "Provided by"], rows),
        "",
        toml_block(
            '[storage]\nurl = "sqlite:///threads.db"\n'
            + "".join(
                f"{key} = {toml_value(value)}\n"
                for key, value in defaults.items()
                if value is not None
            )
        ),
        "",
    ]
    return "\n".join(out)


def _durability(plugins: Any) -> str:
    engines: Mapping[str, Any] = plugins.durability_engines()
    out = [
        "## Durability { #durability }",
        "",
        "`[durability]` — provided by **pai-core**: `engine` names an engine a plugin "
        "registers; every other key of the table is that engine's option.",
        "",
        keys_section("[durability]", ("engine",), _DURABILITY_KEYS, what="the engine key"),
        "",
    ]
    for name, registration in sorted(engines.items()):
        model = engine_options(registration)
        if model is None:
            out += [
                f'### `engine = "{name}"`',
                "",
                f"Provided by **{registration.distribution}**: {prose(registration.description)}."
                " Its options are not described by a model this page can read.",
                "",
            ]
            continue
        out.append(
            options_section(
                "[durability]",
                model,
                heading=f'`engine = "{name}"`',
                description=registration.description,
                distribution=registration.distribution,
                prelude={"engine": toml_value(name)},
            )
        )
    return "\n".join(out)


def _chat() -> str:
    keys = _first(["CHAT_KEYS"], ["pai.core._chat_target", "pai.core._chat"]) or tuple(_CHAT_KEYS)
    return "\n".join(
        [
            "## Chat { #chat }",
            "",
            "`[chat]` — provided by **pai-core**.",
            "",
            keys_section("[chat]", keys, _CHAT_KEYS, what="CHAT_KEYS"),
            "",
            toml_block('[chat]\nagent = "myapp.agents:coder"'),
            "",
        ]
    )


def _serve() -> str:
    keys = _first(["SERVE_KEYS"], ["pai.http", "pai.http._serve"])
    if keys is None:
        return "## Serve { #serve }\n\n`[serve]` is read by pai-http, which is not installed.\n"
    return "\n".join(
        [
            "## Serve { #serve }",
            "",
            "`[serve]` — provided by **pai-http**; `pai serve`'s options win over it "
            "(see [`pai serve`](cli.md#pai-serve)).",
            "",
            keys_section("[serve]", keys, _SERVE_KEYS, what="SERVE_KEYS of pai-http"),
            "",
            toml_block('[serve]\ntarget = "myapp.server:pai"\nport = 8000'),
            "",
        ]
    )


# -- the CLI page ---------------------------------------------------------------------------------


def _cli() -> click.Group:
    create_cli = _first(["create_cli"], ["pai.core.cli"])
    if create_cli is None:
        raise GenerationError("pai.core.cli.create_cli not found: is pai-core installed?")
    return create_cli()


def _walk(
    command: click.Command, path: tuple[str, ...]
) -> Iterable[tuple[tuple[str, ...], click.Command]]:
    import click

    if getattr(command, "hidden", False):
        return
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from _walk(command.commands[name], (*path, name))


def _providers_of_commands() -> dict[tuple[str, ...], str]:
    """Which distribution adds each command path: each plugin's ``pai_cli`` hook is run on a
    group holding only pai-core's commands, and what it adds is its own."""
    plugins = _plugins()
    create_cli = _first(["create_cli"], ["pai.core.cli"])
    plugins_class = _first(["Plugins"], ["pai.core", "pai.core.ext"])
    if create_cli is None or plugins_class is None:
        return {}
    core = create_cli(plugins_class())
    found = {path: "pai-core" for path, _ in _walk(core, ("pai",))}
    for impl in plugins.manager.hook.pai_cli.get_hookimpls():
        fresh = create_cli(plugins_class())
        try:
            impl.function(fresh)
        except Exception:  # a failing plugin: pai reports it; its commands are missing here
            continue
        distribution = plugins.distribution_of(impl.plugin_name)
        for path, _ in _walk(fresh, ("pai",)):
            found.setdefault(path, distribution)
    return found


def _help_text(text: str | None) -> str:
    """Click help as markdown paragraphs (``\\b`` markers dropped, blank lines kept)."""
    if not text:
        return ""
    text = inspect.cleandoc(text).split("\f", 1)[0]
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip() and p.strip() != "\b"]
    return "\n\n".join(prose(p.replace("\b", "")) for p in paragraphs)


def _param_type(param: click.Parameter) -> str:
    import click

    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(kind, click.Choice):
        return " | ".join(str(choice) for choice in kind.choices)
    text = kind.name
    if isinstance(kind, click.IntRange | click.FloatRange):
        low = "" if kind.min is None else f"{kind.min}{'<' if kind.min_open else '≤'}"
        high = "" if kind.max is None else f"{'<' if kind.max_open else '≤'}{kind.max}"
        text = f"{text} ({low}x{high})"
    return text + (f" (nargs={param.nargs})" if param.nargs > 1 else "")


def _param_default(param: click.Parameter) -> str:
    import click

    if isinstance(param, click.Option) and param.is_flag and not param.default:
        return ""
    default = param.default
    if callable(default):
        return "*computed*"
    if default is None or default == () or type(default).__name__ in {"Sentinel", "_Unset"}:
        return ""
    if isinstance(default, list | tuple):
        return code(" ".join(str(item) for item in cast("Sequence[object]", default)))
    return code(str(default))


def cli_reference() -> str:
    """The command-line reference: every command of ``pai``, plugins' among them, with its
    usage line, help, arguments and options, as markdown."""
    import click

    root = _cli()
    providers = _providers_of_commands()
    out: list[str] = []
    contexts: dict[tuple[str, ...], click.Context] = {}
    commands = list(_walk(root, ("pai",)))
    out += [
        f"{len(commands)} commands. Every command takes `-h` / `--help`, which prints its help.",
        "",
    ]
    for path, command in commands:
        parent = contexts.get(path[:-1])
        ctx = click.Context(command, info_name=path[-1], parent=parent)
        contexts[path] = ctx
        name = " ".join(path)
        anchor = "-".join(path)
        level = min(2 + max(len(path) - 2, 0), 4)
        out += [f"{'#' * level} `{name}` {{ #{anchor} }}", ""]
        distribution = providers.get(path)
        if distribution and distribution != "pai-core":
            out += [f"Provided by **{distribution}**.", ""]
        out += [toml_block(command.get_usage(ctx)).replace("```toml", "```text"), ""]
        help_text = _help_text(command.help)
        if help_text:
            out += [help_text, ""]
        params = [
            param
            for param in command.get_params(ctx)
            if not getattr(param, "hidden", False) and "--help" not in param.opts
        ]
        arguments = [param for param in params if isinstance(param, click.Argument)]
        options = [param for param in params if isinstance(param, click.Option)]
        if arguments:
            rows = [
                [
                    code(param.human_readable_name),
                    code(_param_type(param)),
                    "yes" if param.required else "no",
                    _param_default(param),
                ]
                for param in arguments
            ]
            out += [table(["Argument", "Type", "Required", "Default"], rows), ""]
        if options:
            rows = [
                [
                    ", ".join(code(opt) for opt in [*param.opts, *param.secondary_opts]),
                    code(_param_type(param)),
                    _param_default(param),
                    prose(param.help or ""),
                ]
                for param in options
            ]
            out += [table(["Option", "Type", "Default", "Help"], rows), ""]
        if isinstance(command, click.Group) and command.commands:
            listed = [
                [f"[{code(f'{name} {sub}')}](#{anchor}-{sub})", prose(cmd.get_short_help_str(80))]
                for sub, cmd in sorted(command.commands.items())
                if not cmd.hidden
            ]
            out += [table(["Command", "What it does"], listed), ""]
    return "\n".join(out).rstrip() + "\n"


# -- the mkdocs hook ------------------------------------------------------------------------------

GENERATORS: Mapping[str, Callable[[], str]] = {"config": config_reference, "cli": cli_reference}
"""Marker name -> the function whose markdown replaces it."""


def fill(markdown: str) -> str:
    """``markdown`` with every ``<!-- generated: <name> -->`` line replaced by its reference."""

    def replace(match: re.Match[str]) -> str:
        generator = GENERATORS.get(match.group("name"))
        if generator is None:
            raise GenerationError(
                f"unknown marker {match.group(0)!r}; the markers are: "
                + ", ".join(f"<!-- generated: {name} -->" for name in GENERATORS)
            )
        return generator()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    """mkdocs hook: fill the generated markers of a page (a page without one is unchanged)."""
    return fill(markdown) if MARKER.search(markdown) else markdown
