"""``pai threads ls|show|rm``: the stored threads of a scope, and what ``pai chat`` says about
them (which thread it goes on with, and what it leaves behind).

The threads are those of the storage ``pai chat`` uses: ``[storage]`` of the configuration, or
the storage of the target (``--target MODULE:ATTR``, else ``[chat] agent``) when it is an app
with its own. Without persistent storage every ``pai chat`` keeps its threads in its own
process, and the commands say so instead of listing nothing. The scope is ``cli`` (the one
``pai chat`` uses for an agent), or ``--scope KEY``, or what an app's scope_key makes of
``--identity VALUE``.

Deleting a thread goes through the target's runtime, so its capability instances (its sandbox)
are disposed as the runtime disposes them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pai.core.cli import echo_json, echo_table, fail, json_option, note

if TYPE_CHECKING:
    from pai.core._admin import ThreadHandle
    from pai.core._chat_target import ChatTarget, InstanceNote, TargetSpec
    from pai.core._config import PaiConfig
    from pai.core._lifecycle import RuntimeErrorEvent
    from pai.core._messages import Message
    from pai.core._storage import Storage, ThreadRecord

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_FOUND = 1
"""The exit status when a thread named does not exist (as ``docker rm`` of a missing name)."""

PREVIEW = 60
"""How many characters of a thread's first message ``pai threads ls`` shows."""

NO_STORAGE = (
    "{why}, so every `pai chat` keeps its threads in its own process memory and they end with "
    "it: there are no stored threads {what}. To keep threads across chats, set in pai.toml:"
    '\n\n    [storage]\n    url = "sqlite:///threads.db"\n'
)


def why_not_stored(config: PaiConfig) -> str:
    """Why threads are not kept across processes: no ``[storage]``, or one in memory."""
    from pai.core._config import origin_of

    if config.data.get("storage") is None:
        return "no [storage] is configured"
    return f"the [storage] configured ({origin_of(config, ('storage', 'url'))}) is in memory"


class ThreadMissing(click.ClickException):
    """A thread named on the command line does not exist: exit status 1."""

    exit_code = EXIT_NOT_FOUND

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


# -- where the threads are ------------------------------------------------------------------------


@dataclass(slots=True)
class ThreadsView:
    """The threads of one scope in one storage, and the target's runtime when there is one."""

    storage: Storage
    scope_key: str
    target: ChatTarget | None
    failures: list[RuntimeErrorEvent]
    """Failures the runtime absorbed (a dispose that raised), in order."""

    async def find(self, thread_id: str) -> ThreadRecord:
        """The top-level thread ``thread_id`` of this scope; :class:`ThreadMissing` naming the
        scope it is in when it is in another one."""
        record = await self.storage.get_thread(thread_id)
        if record is None:
            raise ThreadMissing(
                f"no thread {thread_id!r} in {describe_storage(self.storage)}; "
                "`pai threads ls` lists the threads of a scope"
            )
        if record.scope_key != self.scope_key:
            raise ThreadMissing(
                f"thread {thread_id!r} is not in scope {self.scope_key!r} but in scope "
                f"{record.scope_key!r}; pass --scope {_shell(record.scope_key)}"
            )
        if record.parent_thread_id is not None:
            raise ThreadMissing(
                f"thread {thread_id!r} is delegated from thread {record.parent_thread_id!r} "
                "(a subagent's); show or remove its top-level thread instead"
            )
        return record


def describe_storage(storage: Storage) -> str:
    """The storage in words, for messages (no URL: it could hold a password)."""
    from pai.core._storage_sqlite import SqliteStorage

    if isinstance(storage, SqliteStorage):
        return f"the SQLite database {storage.path}"
    return f"the {type(storage).__name__}"


def _shell(text: str) -> str:
    import shlex

    return shlex.quote(text)


def target_options(command: F) -> F:
    """The options every ``pai threads`` command takes to find the threads."""
    for option in reversed(
        [
            click.option(
                "--target",
                metavar="MODULE:ATTR",
                help="The agent, create_pai app, or function returning one that pai chat runs "
                "(default: [chat] agent); its storage and, for rm, its capabilities.",
            ),
            click.option(
                "--agent",
                "agent_id",
                metavar="NAME",
                help="The agent of an app with several.",
            ),
            click.option(
                "--scope",
                metavar="KEY",
                help="The scope key of the threads (default: cli, the one pai chat uses).",
            ),
            click.option(
                "--identity",
                metavar="VALUE",
                help="The identity the target's scope_key makes the scope key of (JSON, or text).",
            ),
            json_option,
        ]
    ):
        command = option(command)
    return command


@dataclass(frozen=True, slots=True)
class TargetOptions:
    target: str | None
    agent_id: str | None
    scope: str | None
    identity: str | None


@asynccontextmanager
async def open_threads(
    options: TargetOptions, config: PaiConfig, *, what: str, need_target: bool = False
) -> AsyncGenerator[ThreadsView]:
    """The threads the options name: through the target's runtime when there is a target, else
    in the storage ``[storage]`` configures. Fails when the storage keeps threads in-process."""
    from pai.core._chat_target import (
        CLI_SCOPE,
        is_process_local,
        open_chat_target,
        parse_identity,
        target_spec,
    )
    from pai.core._storage_config import storage_from_config

    spec: TargetSpec | None = target_spec(config, options.target)
    if spec is None:
        if need_target:
            fail(
                f"{what} disposes the thread's capability instances (its sandbox) through the "
                "agent's bindings, so it needs the agent: pass --target MODULE:AGENT (as you "
                'pass it to pai chat), or configure it in pai.toml: [chat] agent = "MODULE:AGENT"'
            )
        for name, value in (("--agent", options.agent_id), ("--identity", options.identity)):
            if value is not None:
                fail(
                    f"{name} {value} applies to a target, and none is given: pass --target "
                    "MODULE:ATTR or configure [chat] agent"
                )
        storage = storage_from_config(config)
        if storage is None or is_process_local(storage):
            fail(NO_STORAGE.format(why=why_not_stored(config), what=what))
        try:
            yield ThreadsView(storage, options.scope or CLI_SCOPE, None, [])
        finally:
            await storage.aclose()
        return
    failures: list[RuntimeErrorEvent] = []

    def absorbed(event: RuntimeErrorEvent) -> None:
        failures.append(event)

    async with open_chat_target(
        spec,
        config=config,
        agent_id=options.agent_id,
        scope=options.scope,
        identity=parse_identity(options.identity),
        on_runtime_error=absorbed,
    ) as target:
        if is_process_local(target.storage):
            fail(NO_STORAGE.format(why=why_not_stored(config), what=what))
        yield ThreadsView(target.storage, target.scope_key, target, failures)


def _run(body: Callable[[PaiConfig], Any]) -> None:
    import anyio

    from pai.core.cli import load_checked_config

    config = load_checked_config()
    anyio.run(functools.partial(body, config))


# -- what a thread holds, in words --------------------------------------------------------------


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _preview(messages: Sequence[Message]) -> str:
    from pai.core._chat_render import escape_controls
    from pai.core._messages import UserMessage

    first = next((m for m in messages if isinstance(m, UserMessage)), None)
    return escape_controls(_one_line(first.content, PREVIEW)) if first is not None else ""


def show_messages(messages: Sequence[Message]) -> None:
    """Print a thread's messages as ``pai chat`` shows them (plain text, control characters
    written out): ``you>`` lines, answers, tool calls and their results."""
    from pai.core._chat_render import PlainView, call_line, describe_result, escape_controls
    from pai.core._messages import AssistantMessage, ErrorMessage, ToolResultMessage, UserMessage

    view = PlainView()
    for message in messages:
        if isinstance(message, UserMessage):
            view.line(f"you> {escape_controls(message.content)}")
        elif isinstance(message, AssistantMessage):
            if message.content:
                view.line(escape_controls(message.content))
            for call in message.tool_calls:
                view.line(call_line(call, "  "))
        elif isinstance(message, ToolResultMessage):
            view.result(describe_result(message, "  "))
        elif isinstance(message, ErrorMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
            view.line(
                escape_controls(
                    f"error ({message.source}, {message.error_type}): {message.message}"
                )
            )


def _record_json(record: ThreadRecord) -> dict[str, object]:
    return {
        "id": record.id,
        "scope": record.scope_key,
        "agent": record.agent_name,
        "created_at": record.created_at.isoformat(),
    }


# -- pai threads ... ------------------------------------------------------------------------------


@click.group("threads")
def threads_group() -> None:
    """List, show and remove the stored threads of pai chat.

    Threads are kept in the storage [storage] configures (url = "sqlite:///threads.db"), under
    the scope key "cli" for pai chat's own runtime (--scope picks another). Removing a thread
    disposes what it owns (its sandbox) through the agent's runtime, so rm needs the agent:
    --target MODULE:ATTR or [chat] agent.
    """


@threads_group.command("ls")
@target_options
def threads_ls(
    target: str | None,
    agent_id: str | None,
    scope: str | None,
    identity: str | None,
    as_json: bool,
) -> None:
    """List the threads of a scope, oldest first."""
    options = TargetOptions(target, agent_id, scope, identity)

    async def body(config: PaiConfig) -> None:
        async with open_threads(options, config, what="to list") as view:
            records = await view.storage.list_threads(view.scope_key)
            rows: list[dict[str, object]] = []
            for record in records:
                messages = await view.storage.get_messages(record.id)
                rows.append(
                    {
                        **_record_json(record),
                        "messages": len(messages),
                        "preview": _preview(messages),
                    }
                )
            where = describe_storage(view.storage)
            if as_json:
                echo_json({"storage": where, "scope": view.scope_key, "threads": rows})
                return
            if not rows:
                note(f"no threads in scope {view.scope_key!r} of {where}")
                return
            echo_table(
                rows,
                [
                    ("id", "Thread"),
                    ("agent", "Agent"),
                    ("created_at", "Created"),
                    ("messages", "Messages"),
                    ("preview", "First message"),
                ],
            )

    _run(body)


@threads_group.command("show")
@click.argument("thread_id", metavar="ID")
@target_options
def threads_show(
    thread_id: str,
    target: str | None,
    agent_id: str | None,
    scope: str | None,
    identity: str | None,
    as_json: bool,
) -> None:
    """Print the messages of thread ID (exit status 1 when there is none)."""
    options = TargetOptions(target, agent_id, scope, identity)

    async def body(config: PaiConfig) -> None:
        async with open_threads(options, config, what="to show") as view:
            record = await view.find(thread_id)
            messages = await view.storage.get_messages(record.id)
            if as_json:
                echo_json(
                    {
                        "thread": _record_json(record),
                        "messages": [m.model_dump(mode="json") for m in messages],
                    }
                )
                return
            show_messages(messages)

    _run(body)


@threads_group.command("rm")
@click.argument("thread_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--force", "-f", is_flag=True, help="Succeed for a thread that does not exist.")
@target_options
def threads_rm(
    thread_ids: tuple[str, ...],
    force: bool,
    target: str | None,
    agent_id: str | None,
    scope: str | None,
    identity: str | None,
    as_json: bool,
) -> None:
    """Remove threads and dispose what they own (their sandbox).

    Removes each thread ID, the threads delegated from it and their messages, and disposes
    their capability instances through the agent's runtime. A thread that does not exist is an
    error (exit status 1) unless --force is given.
    """
    options = TargetOptions(target, agent_id, scope, identity)
    outcome: dict[str, list[Any]] = {
        "removed": [],
        "missing": [],
        "errors": [],
        "dispose_failed": [],
    }

    async def body(config: PaiConfig) -> None:
        async with open_threads(options, config, what="to remove", need_target=True) as view:
            assert view.target is not None
            admin = view.target.admin()
            for thread_id in thread_ids:
                try:
                    record = await view.find(thread_id)
                except ThreadMissing as missing:
                    outcome["missing"].append(thread_id)
                    if not force:
                        click.echo(f"Error: {missing.format_message()}", err=True)
                    continue
                if record.agent_name not in view.target.agent_names:
                    outcome["errors"].append(thread_id)
                    click.echo(
                        f"Error: thread {thread_id!r} is a thread of agent "
                        f"{record.agent_name!r}, not of {view.target.label}; pass the --target "
                        "(and --agent) that runs it",
                        err=True,
                    )
                    continue
                disposed = view.target.thread_instances(thread_id)
                before = len(view.failures)
                await admin.thread(thread_id).delete()
                failed = view.failures[before:]
                for event in failed:
                    outcome["dispose_failed"].append(
                        {
                            "thread": thread_id,
                            "capability": event.capability_id,
                            "key": event.key,
                            "error": event.message,
                        }
                    )
                    click.echo(f"Error: {event.message}", err=True)
                outcome["removed"].append(
                    {
                        "id": thread_id,
                        "disposed": [
                            {"capability": each.capability_id, "key": each.key} for each in disposed
                        ],
                    }
                )
                if not as_json:
                    click.echo(thread_id)

    _run(body)
    if as_json:
        echo_json(outcome)
    if outcome["dispose_failed"] or outcome["errors"] or (outcome["missing"] and not force):
        sys.exit(EXIT_NOT_FOUND)


# -- what pai chat says -----------------------------------------------------------------------


async def chat_thread(target: ChatTarget, *, thread_id: str | None, latest: bool) -> ThreadHandle:
    """The thread ``pai chat`` talks in: ``thread_id``, the latest one (``--continue``), or a
    new one; says which on stderr."""
    from pai.core._chat_target import is_process_local

    if thread_id is not None and latest:
        fail("--thread and --continue each choose the thread: give one of them")
    admin = target.admin()
    if thread_id is None and not latest:
        thread = await admin.create_thread()
        note(f"thread {thread.id} (come back to it with --thread {thread.id})")
        return thread
    given = f"--thread {thread_id}" if thread_id is not None else "--continue"
    if is_process_local(target.storage):
        fail(
            f"{given} goes on with a stored thread, but {why_not_stored(target.config)} "
            "(threads live in process memory and end with each chat); set in pai.toml:\n\n"
            '    [storage]\n    url = "sqlite:///threads.db"\n\nthen start a chat, and resume '
            "it with --thread or --continue"
        )
    view = ThreadsView(target.storage, target.scope_key, target, [])
    if thread_id is not None:
        record = await view.find(thread_id)
        if record.agent_name != target.agent.name:
            fail(
                f"thread {thread_id!r} is a thread of agent {record.agent_name!r}, not of "
                f"{target.label}; chat with that agent to go on with it"
            )
    else:
        mine = [
            record
            for record in await admin.list_threads()
            if record.agent_name == target.agent.name
        ]
        if not mine:
            fail(
                f"--continue: agent {target.agent.name!r} has no thread in scope "
                f"{target.scope_key!r} of {describe_storage(target.storage)} yet; start one "
                "with pai chat (without --continue)"
            )
        record = mine[-1]
    note(f"going on with thread {record.id}")
    return admin.thread(record.id)


def _rm_hint(target: ChatTarget, thread_id: str) -> str:
    """The ``pai threads rm`` command that removes ``thread_id`` of ``target``."""
    from pai.core._chat_target import CLI_SCOPE

    words = ["pai", "threads", "rm", thread_id]
    if target.spec.configured_in is None:
        words += ["--target", target.spec.target]
    if target.agent_id is not None:
        words += ["--agent", target.agent_id]
    if target.scope_key != CLI_SCOPE:
        words += ["--scope", target.scope_key]
    return " ".join(_shell(word) for word in words)


async def instances_used(target: ChatTarget, thread_id: str) -> list[InstanceNote]:
    """The capability instances thread ``thread_id`` owns that something in it used.

    Instances are made on first use, so an instance only exists when a tool declaring its
    capability ran in the thread (its result is stored). A capability some command or subagent
    declares may have been used without a trace in the thread: it counts as used.
    """
    from pai.core._messages import ToolResultMessage

    notes = target.thread_instances(thread_id)
    if not notes:
        return []
    ran = {
        message.tool_name
        for message in await target.storage.get_messages(thread_id)
        if isinstance(message, ToolResultMessage)
    }
    agent = target.agent
    used: list[InstanceNote] = []
    for each in notes:
        declaring = {
            name
            for name, tool in agent.tools.items()
            if any(cap.id == each.capability_id for cap in tool.capabilities.values())
        }
        requirement = agent.requirements.get(each.capability_id)
        elsewhere = requirement is not None and len(requirement.declared_by) > len(declaring)
        if elsewhere or ran & declaring:
            used.append(each)
    return used


async def say_what_stays(target: ChatTarget, thread_id: str) -> None:
    """At the end of a chat: which capability instances (the sandbox) the thread leaves, with
    provider and key, and how to remove them. Says nothing when no instance was used."""
    from pai.core._chat_target import is_process_local

    stored = not is_process_local(target.storage)
    for each in await instances_used(target, thread_id):
        if each.provider is not None:
            provider = f"provider {each.provider!r}"
        elif target.kind == "agent":
            provider = "the default provider"
        else:
            provider = f"bound {each.origin}"
        noun = "sandbox" if each.capability_id == "sandbox" else f"{each.capability_id!r} instance"
        ways = [f"`{_rm_hint(target, thread_id)}` (the thread and its {noun})"] if stored else []
        if each.capability_id == "sandbox":
            ways.append(f"`pai sandbox rm {_shell(each.key)}`")
        how = " or ".join(ways) if ways else "the provider's own tools"
        ends = (
            f" The thread itself ends now: {why_not_stored(target.config)}." if not stored else ""
        )
        note(
            f"thread {thread_id} leaves its {noun} {each.key} ({provider}).{ends} Unless the "
            f"provider keeps it in this process only, it stays until removed: {how}"
        )


__all__ = [
    "EXIT_NOT_FOUND",
    "ThreadMissing",
    "ThreadsView",
    "chat_thread",
    "describe_storage",
    "instances_used",
    "say_what_stays",
    "show_messages",
    "threads_group",
]
