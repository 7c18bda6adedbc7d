"""What ``pai chat`` runs: the target ``MODULE:ATTR`` names, built into a runtime.

A target (the argument of ``pai chat``, or ``[chat] agent``) names one of:

- an agent (``define_agent(...)``): ``pai chat`` builds its runtime, binding its capabilities
  from configuration and giving it ``--model`` or ``[model]`` when it has no model;
- an app (``create_pai(...)``): its runtimes are built already, capabilities bound in code
  included; ``--agent NAME`` chooses one when it has several;
- a runtime (``create_agent_runtime(...)``);
- a function taking no arguments (``def`` or ``async def``) that returns one of these, so
  building it waits until it is needed.

:func:`open_chat_target` builds exactly what ``pai chat`` runs and says what it lacks (a model,
say); ``pai config --check`` (:func:`check_configured_target`) and ``pai threads`` use it too.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pai.core._agent import Agent
from pai.core._config import PYPROJECT, PaiConfig, did_you_mean, origin_of, source_folder
from pai.core._errors import ConfigError, PaiError, UserError
from pai.core._pai import Pai
from pai.core._runtime import AgentRuntime
from pai.core._scope import ScopeKind

if TYPE_CHECKING:
    from pai.core._admin import AdminClient
    from pai.core._lifecycle import OnRuntimeError
    from pai.core._model import Model
    from pai.core._plugins import Plugins
    from pai.core._storage import Storage

CLI_SCOPE = "cli"
"""The scope key of the threads ``pai chat`` makes for an agent (``--scope`` picks another)."""

THREAD_KINDS: tuple[ScopeKind, ...] = ("thread", "rootThread")
"""The scopes whose instances a top-level thread owns: deleting it disposes them."""

CHAT_KEYS = ("agent",)
"""The keys of the ``[chat]`` table."""

_KINDS = "an agent, a create_pai(...) app, a runtime, or a function returning one of them"


class ChatTargetError(UserError, ValueError):
    """``pai chat``'s target cannot be used: the module, the attribute, what it is, or what it
    lacks."""


class AgentChoiceError(ChatTargetError):
    """The target is an app with several agents and ``--agent`` chose none of them."""

    def __init__(self, message: str, agent_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.agent_ids = agent_ids


# -- naming the target --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """A target as written: ``"module:attribute"``, where it was set (``None`` for an argument)
    and the folder that is importable besides the working directory."""

    target: str
    configured_in: str | None = None
    folder: Path | None = None
    command: str = "pai chat"
    """The command that takes the target, for messages (``pai serve`` names an app)."""
    example: str = "`pai chat myapp.agents:coder` for the agent `coder` defined in myapp/agents.py"
    """How to write a target, for messages."""

    @property
    def subject(self) -> str:
        """How messages name it: ``'myapp:coder'`` or ``chat.agent = 'myapp:coder' (pai.toml)``."""
        if self.configured_in is None:
            return repr(self.target)
        return f"chat.agent = {self.target!r} ({self.configured_in})"


def chat_agent_from_config(config: PaiConfig) -> tuple[str, str, Path | None] | None:
    """The agent ``[chat]`` configures as ``(target, source, folder)``, or ``None`` without one.

    ``source`` says where ``agent`` was set, for messages; ``folder`` is the folder of the file
    that set it (importable, like the working directory). An unknown key, a value that is not
    a ``"module:attribute"`` string, or a ``chat`` that is not a table is a
    :class:`~pai.core.ConfigError` naming where it was set.
    """
    table = config.data.get("chat")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"chat = {table!r} ({origin_of(config, ('chat',))}) is not a table; write [chat] "
            'with agent = "myapp.agents:coder"'
        )
    section = cast("Mapping[str, Any]", table)
    for key in sorted(section):
        if key in CHAT_KEYS:
            continue
        raise ConfigError(
            f"unknown key chat.{key} ({origin_of(config, ('chat', key))}); "
            f"{did_you_mean(key, CHAT_KEYS)}[chat] takes: "
            f"{', '.join(CHAT_KEYS)}"
        )
    if "agent" not in section:
        return None
    value = section["agent"]
    source = config.sources.get(("chat", "agent"))
    where = origin_of(config, ("chat", "agent"))
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"chat.agent = {value!r} ({where}) must be a non-empty string naming your agent as "
            '"<module>:<attribute>", e.g. agent = "myapp.agents:coder"'
        )
    return value.strip(), where, source_folder(source)


def target_spec(config: PaiConfig, argument: str | None) -> TargetSpec | None:
    """The target to run: ``argument`` when given, else ``[chat] agent``, else ``None``.

    ``[chat]`` is checked even when an argument wins, so a mistake there shows at once.
    """
    configured = chat_agent_from_config(config)
    if argument is not None:
        return TargetSpec(argument)
    if configured is None:
        return None
    target, where, folder = configured
    return TargetSpec(target, where, folder)


def _chat_toml(config: PaiConfig) -> str:
    """The ``[chat]`` table to add, for the file the configuration comes from."""
    target = config.files[0] if config.files else Path("pai.toml")
    prefix = "tool.pai." if target.name == PYPROJECT else ""
    return f'add to {target}:\n\n    [{prefix}chat]\n    agent = "myapp.agents:coder"\n\n'


def no_agent_message(config: PaiConfig) -> str:
    """What ``pai chat`` says when neither an argument nor ``[chat] agent`` names an agent."""
    return (
        "no agent to chat with: name it as MODULE:AGENT, e.g. `pai chat myapp.agents:coder` for "
        "the agent `coder` defined in myapp/agents.py (or a create_pai(...) app, or a function "
        "returning an agent, a runtime or an app), or configure it once and run `pai chat`; "
        + _chat_toml(config)
        + "(or set PAI_CHAT__AGENT=myapp.agents:coder). `pai demo --model openai:NAME` runs the "
        "demo agent on a model"
    )


# -- importing it -------------------------------------------------------------------------------


def import_target(spec: TargetSpec) -> object:
    """The object ``spec`` names, imported (the working directory and ``spec.folder`` are
    importable). Raises :class:`ChatTargetError` naming the module or attribute that is wrong."""
    subject = spec.subject if spec.configured_in is not None else f"target {spec.target!r}"
    module_name, colon, attribute = spec.target.partition(":")
    if not colon or not module_name or not attribute:
        raise ChatTargetError(
            f"{subject} is not '<module>:<attribute>'; write, e.g., "
            + (
                spec.example
                if spec.configured_in is None
                else 'agent = "myapp.agents:coder" for the agent `coder` defined in myapp/agents.py'
            )
        )
    folder = spec.folder
    for path in (Path.cwd(), folder):
        if path is not None and str(path) not in sys.path:
            sys.path.insert(0, str(path))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (
            module_name == error.name or module_name.startswith(error.name + ".")
        ):
            looked = "the working directory" + (
                f", {folder}" if folder is not None and folder != Path.cwd() else ""
            )
            raise ChatTargetError(
                f"{subject}: there is no module {module_name!r} (looked in {looked} and the "
                f"installed packages); run {spec.command} from your project's folder, install "
                "your package, or fix the module name"
            ) from error
        raise _import_failed(subject, module_name, error) from error
    except Exception as error:  # the user's module raised while importing
        raise _import_failed(subject, module_name, error) from error
    found = getattr(module, attribute, None)
    if found is None:
        names = [name for name in vars(module) if not name.startswith("_")]
        hint = did_you_mean(attribute, names, before="; ", after="")
        raise ChatTargetError(
            f"{subject}: module {module_name!r} has no attribute {attribute!r}{hint}"
        )
    return found


def _import_failed(subject: str, module_name: str, error: Exception) -> ChatTargetError:
    return ChatTargetError(
        f"{subject}: importing module {module_name!r} failed with {type(error).__name__}: "
        f"{error}; fix that module (`python -c 'import {module_name}'` shows the traceback)"
    )


def _not_a_target(subject: str, found: object, *, returned: bool = False) -> ChatTargetError:
    what = f"returned a {type(found).__name__}" if returned else f"is a {type(found).__name__}"
    return ChatTargetError(
        f"{subject} {what}, not an agent; point it at {_KINDS} (the value define_agent(...) "
        "or create_pai(...) returned, say)"
    )


def load_agent(
    target: str, *, configured_in: str | None = None, folder: Path | None = None
) -> Agent:
    """The agent ``"package.module:attribute"`` names (the working directory is importable).

    ``configured_in`` is where ``[chat] agent`` set ``target`` (a file, an environment
    variable), for the messages; ``folder`` is importable too (that file's folder). Only an
    agent object is accepted here; :func:`open_chat_target` takes apps and functions too.
    """
    spec = TargetSpec(target, configured_in, folder)
    found = import_target(spec)
    if not isinstance(found, Agent):
        raise _not_a_target(spec.subject, found)
    return found


def configured_agent(config: PaiConfig) -> object | None:
    """The object ``[chat] agent`` names, imported (``None`` when none is configured); raises
    :class:`ChatTargetError` naming the key and the file when it cannot be imported."""
    spec = target_spec(config, None)
    return None if spec is None else import_target(spec)


async def _evaluate(spec: TargetSpec) -> tuple[Agent | AgentRuntime | Pai, bool]:
    """The agent, runtime or app the target names, and whether it was made here (by calling the
    function it names), so closing it is ours."""
    found = import_target(spec)
    if isinstance(found, Agent | AgentRuntime | Pai):
        return found, False
    if not callable(found) or isinstance(found, type):
        raise _not_a_target(spec.subject, found)
    function = cast("Any", found)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind()
        except TypeError:
            raise ChatTargetError(
                f"{spec.subject} is a function taking arguments {list(signature.parameters)}; "
                f"pai chat calls it with none: give them defaults, or point at {_KINDS}"
            ) from None
    try:
        made = function()
        if inspect.isawaitable(made):
            made = await cast("Any", made)
    except PaiError as error:
        raise ChatTargetError(f"{spec.subject}: calling it failed: {error}") from error
    except Exception as error:
        raise ChatTargetError(
            f"{spec.subject}: calling it failed with {type(error).__name__}: {error}"
        ) from error
    if isinstance(made, Agent | AgentRuntime | Pai):
        return made, True
    raise _not_a_target(f"{spec.subject}()", made, returned=True)


# -- building what pai chat runs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InstanceNote:
    """A capability instance a thread owns (deleting the thread disposes it)."""

    capability_id: str
    key: str
    provider: str | None
    """The provider configuration names (``[capabilities.<id>] provider``), when it does."""
    origin: str
    """Where the binding comes from, in words: configuration, or the app's code."""


@dataclass(slots=True)
class ChatTarget:
    """What ``pai chat`` runs: a runtime, its agent and model, and what it lacks to run.

    Use :meth:`admin` for its threads; :func:`open_chat_target` closes it.
    """

    spec: TargetSpec
    kind: Literal["agent", "runtime", "app"]
    runtime: AgentRuntime
    agent_id: str | None
    """The ``--agent`` that chose it among an app's agents (``None`` for an agent, a runtime,
    or an app of one agent)."""
    scope: str | None
    """The scope key given (``--scope``), or ``None`` when the target's scope_key decides."""
    identity: object
    problems: tuple[str, ...]
    """What the target lacks to chat (no model, ...): empty when it can run."""
    config: PaiConfig
    """The configuration it was built from."""
    _admin: AdminClient | None = field(default=None, repr=False)

    @property
    def agent(self) -> Agent:
        """The agent that runs (models resolved)."""
        return self.runtime.agent

    @property
    def model(self) -> Model | None:
        """The agent's model, or ``None`` when it has none (see :attr:`problems`)."""
        model = self.agent.model
        return None if isinstance(model, str) else model

    @property
    def agent_names(self) -> frozenset[str]:
        """The names of the agent and its subagents: the threads its runtime reaches."""
        from pai.core._assembly import agent_tree

        return frozenset(each.name for each in agent_tree(self.agent))

    @property
    def storage(self) -> Storage:
        """Where its threads are kept."""
        return self.runtime.storage

    @property
    def label(self) -> str:
        """The target in words, for messages: ``agent 'coder' of myapp:pai``."""
        where = f" of {self.spec.target}" if self.kind != "agent" else f" ({self.spec.target})"
        return f"agent {self.agent.name!r}{where}"

    def admin(self) -> AdminClient:
        """The admin client of the scope the target runs in (``--scope`` or its scope_key)."""
        if self._admin is None:
            try:
                self._admin = self.runtime.admin(identity=self.identity)
            except Exception as error:
                raise ChatTargetError(
                    f"the scope_key of {self.spec.target} failed for identity "
                    f"{self.identity!r}: {type(error).__name__}: {error}; pass --scope KEY for "
                    "the scope to use, or --identity VALUE for the identity its scope_key takes"
                ) from error
        return self._admin

    @property
    def scope_key(self) -> str:
        """The scope key its threads are kept under."""
        return self.admin().scope_key

    def thread_instances(self, thread_id: str) -> list[InstanceNote]:
        """The capability instances thread ``thread_id`` owns, by the scope of each binding:
        what deleting the thread disposes, and what stays when it is not deleted."""
        from pai.core._scope import instance_key

        scope_key = self.scope_key
        notes: list[InstanceNote] = []
        for cap_id, binding in sorted(self.runtime.bindings.items()):
            scope = binding.scope
            if not binding.has_dispose or not isinstance(scope, str) or scope not in THREAD_KINDS:
                continue
            key = instance_key(cap_id, scope, (scope_key, thread_id))
            section = self.config.capability(cap_id)
            provider = section.get("provider") if section is not None else None
            origin = (
                f"[capabilities.{cap_id}]"
                if self.kind == "agent"
                else f"as {self.spec.target} binds it"
            )
            notes.append(
                InstanceNote(cap_id, key, provider if isinstance(provider, str) else None, origin)
            )
        return notes


def is_process_local(storage: Storage) -> bool:
    """Whether ``storage`` lives in this process only (an in-process SQLite database, the
    in-memory store): its threads end with the process."""
    from pai.core._storage_memory import InMemoryStorage
    from pai.core._storage_sqlite import SqliteStorage

    if isinstance(storage, InMemoryStorage):
        return True
    return isinstance(storage, SqliteStorage) and storage.path in (":memory:", "")


def parse_identity(text: str | None) -> object:
    """``--identity``'s value: JSON when it parses as JSON (an object becomes a ``dict``), else
    the text itself; ``None`` when not given."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _choose_runtime(app: Pai, spec: TargetSpec, agent_id: str | None) -> tuple[str, AgentRuntime]:
    ids = app.agent_ids
    listed = ", ".join(repr(each) for each in ids)
    if agent_id is None:
        if len(ids) == 1:
            return ids[0], app.runtime(ids[0])
        raise AgentChoiceError(
            f"{spec.subject} is an app with {len(ids)} agents ({listed}); choose one with "
            f"--agent NAME, e.g. --agent {ids[0]}",
            ids,
        )
    if agent_id not in ids:
        raise ChatTargetError(
            f"--agent {agent_id}: the app {spec.target} has no agent {agent_id!r}; "
            f"{did_you_mean(agent_id, ids)}its agents: {listed}"
        )
    return agent_id, app.runtime(agent_id)


def _lacks(runtime: AgentRuntime, kind: str) -> tuple[str, ...]:
    """What the runtime's agent tree lacks to run a chat."""
    from pai.core._assembly import agent_tree

    problems: list[str] = []
    for each in agent_tree(runtime.agent):
        if each.model is not None:
            continue
        top = each is runtime.agent
        fix = (
            "pass --model openai:NAME, or configure one in pai.toml: [model] "
            'provider = "openai", name = "gpt-4.1-mini"'
            if kind == "agent" and top
            else 'give it one in code, or configure [model] (provider = "openai", '
            'name = "gpt-4.1-mini") in pai.toml'
        )
        role = "agent" if top else "subagent"
        problems.append(f"{role} {each.name!r} has no model; {fix}")
    return tuple(problems)


@asynccontextmanager
async def open_chat_target(
    spec: TargetSpec,
    *,
    config: PaiConfig,
    plugins: Plugins | None = None,
    agent_id: str | None = None,
    model_name: str | None = None,
    scope: str | None = None,
    identity: object = None,
    on_runtime_error: OnRuntimeError | None = None,
) -> AsyncGenerator[ChatTarget]:
    """Build exactly what ``pai chat`` runs for ``spec``, and close it on exit.

    An agent gets a runtime of its own, with its capabilities bound from ``config``, its model
    from ``model_name`` (``"openai:gpt-4.1-mini"``) or ``[model]``, and the scope key ``scope``
    (``"cli"`` by default). An app's or a runtime's own scope_key decides the scope from
    ``identity`` unless ``scope`` is given. ``on_runtime_error`` receives the failures the
    runtime absorbs (a ``dispose`` that raised) where the runtime is built here (an agent, or
    any target given ``scope``); an app's own runtimes keep theirs. What cannot be built raises
    :class:`ChatTargetError`; what the target lacks to chat (a model) is in
    :attr:`ChatTarget.problems`, for the caller to report. What is made here (the agent's
    runtime, an app or runtime the named function returned) is closed on exit; an app or
    runtime the module itself holds is left open, as its module owns it.

    Example::

        spec = target_spec(config, "myapp.agents:coder")
        async with open_chat_target(spec, config=config) as target:
            if target.problems:
                raise SystemExit("; ".join(target.problems))
            thread = await target.admin().create_thread()
    """
    from pai.core._assembly import create_agent_runtime
    from pai.core._model import aclose_if_closable
    from pai.core._model_config import resolve_model

    if scope is not None and not scope:
        raise ChatTargetError("--scope must be a non-empty scope key, e.g. --scope cli")
    value, made_here = await _evaluate(spec)
    closing: list[Pai | AgentRuntime] = (
        [value] if made_here and not isinstance(value, Agent) else []
    )
    model: Model | None = None
    try:
        if isinstance(value, Agent):
            if agent_id is not None and agent_id != value.name:
                raise ChatTargetError(
                    f"--agent {agent_id}: {spec.subject} is one agent, {value.name!r}; --agent "
                    "chooses among the agents of a create_pai(...) app"
                )
            if model_name is not None:
                model = resolve_model(model_name, config=config, plugins=plugins)
            fixed = scope if scope is not None else CLI_SCOPE
            try:
                runtime = create_agent_runtime(
                    agent=value,
                    scope_key=lambda _identity: fixed,
                    model=model,
                    on_runtime_error=on_runtime_error,
                    config=config,
                    plugins=plugins,
                )
            except PaiError as error:
                raise ChatTargetError(f"{spec.subject} cannot run: {error}") from error
            closing.append(runtime)
            kind: Literal["agent", "runtime", "app"] = "agent"
            chosen: str | None = None
            scope = fixed
        else:
            if model_name is not None:
                raise ChatTargetError(
                    f"--model {model_name}: {spec.subject} is "
                    f"{'an app' if isinstance(value, Pai) else 'a runtime'}, built with its "
                    "agents' models; give the model in its code, or point pai chat at the "
                    "agent itself (MODULE:AGENT) to choose one here"
                )
            if isinstance(value, Pai):
                kind = "app"
                chosen, runtime = _choose_runtime(value, spec, agent_id)
                if len(value.agent_ids) == 1:
                    chosen = None  # nothing to choose: commands need no --agent
            else:
                kind = "runtime"
                chosen = None
                runtime = value
                if agent_id is not None and agent_id != runtime.agent.name:
                    raise ChatTargetError(
                        f"--agent {agent_id}: {spec.subject} is the runtime of one agent, "
                        f"{runtime.agent.name!r}; --agent chooses among the agents of a "
                        "create_pai(...) app"
                    )
            if scope is not None:
                # The scope given wins over the target's scope_key: a runtime over the same
                # agent, bindings and storage, closed by the target's own close.
                fixed_scope = scope
                runtime = AgentRuntime(
                    agent=runtime.agent,
                    storage=runtime.storage,
                    scope_key=lambda _identity: fixed_scope,
                    user_key=None,
                    bindings=runtime.bindings,
                    on_runtime_error=on_runtime_error,
                    settlement_window=runtime.settlement_window,
                    owns_storage=False,
                    run_lease_ttl=runtime.run_lease_ttl,
                    busy_thread_wait=runtime.busy_thread_wait,
                )
        yield ChatTarget(
            spec=spec,
            kind=kind,
            runtime=runtime,
            agent_id=chosen,
            scope=scope,
            identity=identity,
            problems=_lacks(runtime, kind),
            config=config,
        )
    finally:
        try:
            for each in reversed(closing):
                await each.aclose()
        finally:
            await aclose_if_closable(model)


def lacks_message(target: ChatTarget) -> str:
    """What ``target`` lacks, as one message naming the target."""
    chosen = f" (--agent {target.agent_id})" if target.agent_id is not None else ""
    return f"{target.spec.subject}{chosen} cannot chat: " + "; ".join(target.problems)


def check_configured_target(config: PaiConfig, *, plugins: Plugins | None = None) -> None:
    """Build the target ``[chat] agent`` names as ``pai chat`` would, and raise
    :class:`ChatTargetError` for what it lacks (``pai config --check``). Nothing to check
    without ``[chat] agent``. Call it outside a running event loop."""
    import anyio

    spec = target_spec(config, None)
    if spec is None:
        return

    async def build(agent_id: str | None = None) -> None:
        async with open_chat_target(
            spec, config=config, plugins=plugins, agent_id=agent_id
        ) as target:
            if target.problems:
                raise ChatTargetError(lacks_message(target))

    async def build_each() -> None:
        try:
            await build()
        except AgentChoiceError as several:  # an app: pai chat --agent picks any of them
            for agent_id in several.agent_ids:
                await build(agent_id)

    anyio.run(build_each)


__all__ = [
    "CHAT_KEYS",
    "CLI_SCOPE",
    "AgentChoiceError",
    "ChatTarget",
    "ChatTargetError",
    "InstanceNote",
    "TargetSpec",
    "chat_agent_from_config",
    "check_configured_target",
    "configured_agent",
    "import_target",
    "is_process_local",
    "lacks_message",
    "load_agent",
    "no_agent_message",
    "open_chat_target",
    "parse_identity",
    "target_spec",
]
