"""Server-side access to a runtime: the admin client and thread handles.

They reach the runtime through two small interfaces, :class:`ThreadOperations` and
:class:`RunOperations`, of exactly the operations they need; the runtime's parts implement them
(:class:`~pai.core._threads.Threads` and :class:`~pai.core._loop.AgentLoop`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio

from pai.core._detached import DetachedTask
from pai.core._errors import InvalidThreadIdError
from pai.core._messages import Message, ToolCall
from pai.core._model import Usage
from pai.core._relay import EventRelay
from pai.core._run_events import RunEvent
from pai.core._storage import ThreadRecord


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one agent run produced.

    ``status`` is ``"completed"`` when the model answered without tool calls;
    ``"awaiting_tool_results"`` when it called tools that run outside the runtime (tools defined
    without ``execute``), with or without calls that need approval; ``"awaiting_approval"``
    when every call left pending is of a tool defined with ``needs_approval=True``. Answer all of
    ``pending_tool_calls`` in one :meth:`ThreadHandle.submit_tool_results`: a result for each
    external call, a :class:`~pai.core.ToolApproval` for each of ``pending_approvals``.
    ``usage`` adds up the tokens of the run's model calls (those its models report; delegated
    runs count in their own results).
    """

    thread_id: str
    status: Literal["completed", "awaiting_tool_results", "awaiting_approval"]
    text: str | None
    messages: Sequence[Message]
    steps: int
    pending_tool_calls: Sequence[ToolCall] = ()
    usage: Usage = field(default_factory=Usage)
    pending_approvals: Sequence[ToolCall] = ()
    """The calls among ``pending_tool_calls`` that wait for a human's approval."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who an admin client acts for. ``user_key_error`` is why no user key could be derived (the
    ``user_key`` function raised or returned a non-string): only user-scoped capabilities fail."""

    identity: object
    scope_key: str
    user_key: str | None
    user_key_error: BaseException | None = None


def check_thread_id(value: object, where: str) -> str:
    """``value`` if it is a non-empty ``str``; an :class:`InvalidThreadIdError` otherwise."""
    if not isinstance(value, str) or not value:
        raise InvalidThreadIdError(
            f"{where}: thread_id must be a non-empty str, got {value!r} "
            f"({type(value).__name__}); pass the id as a string, e.g. str({value!r})"
        )
    return value


class ThreadOperations(Protocol):
    """What the admin client does to threads: each call checks the thread is the caller's."""

    @property
    def agent_name(self) -> str:
        """The agent a top-level thread runs."""
        ...

    async def get(self, caller: Caller, thread_id: str) -> ThreadRecord: ...

    async def create(
        self,
        caller: Caller,
        *,
        agent_name: str,
        thread_id: str | None,
        parent: ThreadRecord | None,
    ) -> ThreadRecord: ...

    async def messages(self, caller: Caller, thread_id: str) -> Sequence[Message]: ...

    async def children(self, caller: Caller, thread_id: str) -> Sequence[ThreadRecord]: ...

    async def list_threads(self, caller: Caller) -> Sequence[ThreadRecord]: ...

    async def delete(self, caller: Caller, thread_id: str) -> None: ...


class RunOperations(Protocol):
    """What the admin client runs in a thread: the agent, and commands. ``send`` and
    ``submit_tool_results`` give what to await (no coroutine of their own in between)."""

    def send(
        self,
        caller: Caller,
        thread_id: str,
        text: str,
        emit: Callable[[RunEvent], Awaitable[None]] | None = None,
    ) -> Awaitable[RunResult]: ...

    def submit_tool_results(
        self, caller: Caller, thread_id: str, results: Mapping[str, object]
    ) -> Awaitable[RunResult]: ...

    async def run_command(
        self, caller: Caller, thread_id: str, name: str, raw_input: object
    ) -> object: ...


class _Commands:
    """``handle.commands.<name>(input)``: each attribute runs the agent command of that name."""

    __slots__ = ("_handle",)

    def __init__(self, handle: ThreadHandle) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Callable[[object], Awaitable[Any]]:
        if name.startswith("__"):
            raise AttributeError(name)

        async def call(input: object = None) -> Any:
            return await self._handle.run_command(name, {} if input is None else input)

        return call


class ThreadHandle:
    """One thread, seen by one caller. Cheap to make: no I/O until you use it."""

    def __init__(
        self, threads: ThreadOperations, runs: RunOperations, caller: Caller, thread_id: str
    ) -> None:
        self._threads = threads
        self._runs = runs
        self._caller = caller
        self.id: str = thread_id

    @property
    def commands(self) -> Any:
        """Run a command by attribute: ``await handle.commands.reset_workspace({})``."""
        return _Commands(self)

    async def run_command(self, name: str, input: object) -> Any:
        """Run the agent's command ``name`` in this thread; failures raise to you."""
        return await self._runs.run_command(self._caller, self.id, name, input)

    async def send(self, text: str) -> RunResult:
        """Add a user message and run the agent until it answers (or needs external results)."""
        return await self._runs.send(self._caller, self.id, text)

    async def stream(self, text: str) -> AsyncGenerator[RunEvent, None]:
        """``send``, streamed: add a user message, run the agent, and yield what happens.

        Yields the model's events as they arrive (:class:`~pai.core.ext.TextDelta`, the tool call
        events, :class:`~pai.core.ext.UsageReported`, :class:`~pai.core.ext.ResponseFinished`), each
        step's tool results (:class:`~pai.core.ToolCallResult`), the events of runs delegated to
        subagents (:class:`~pai.core.DelegatedRunEvent`), and last :class:`~pai.core.RunFinished`
        with the :class:`RunResult` ``send`` returns. A failure raises from the iteration, as
        ``send`` would raise it. The run waits for you: it goes on past an event only once you
        have taken it, so a slow reader slows the run down instead of events piling up.

        The thread ends up exactly as after ``send``: each step is stored when it completes.
        A run cancelled (or a stream closed) while the model is answering stores nothing of that
        partial answer: the steps completed before it stay, and the thread takes the next
        message as usual. Stopping early (``break``, or an error in the loop body) cancels the
        run once the event loop closes the abandoned stream; to cancel it at once, and be sure it
        has ended before the next line, close the stream yourself
        (``async with contextlib.aclosing(thread.stream(...)) as events:``).

        Example::

            async for event in thread.stream("list the files"):
                if isinstance(event, TextDelta):
                    print(event.text, end="", flush=True)
                elif isinstance(event, RunFinished):
                    print(f"\n{event.result.usage.total_tokens} tokens")
        """
        relay: EventRelay[RunEvent] = EventRelay()
        failure: list[BaseException] = []

        async def run() -> None:
            try:
                await self._runs.send(self._caller, self.id, text, relay.put)
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as error:  # raised to the reader, never out of the task
                failure.append(error)
            finally:
                relay.end()

        task = DetachedTask(run, name="pai streamed run")
        ended = False
        try:
            async for event in relay:
                yield event
            ended = True
        finally:
            # Also when the reader stopped early and the event loop closes the stream later,
            # from another task: the run is cancelled and has ended before this returns.
            if not ended:
                task.cancel()
            with anyio.CancelScope(shield=True):
                await task.wait()
        if failure:
            raise failure[0]

    async def submit_tool_results(self, results: Mapping[str, object]) -> RunResult:
        """Answer the pending external tool calls (by call id) and continue the run."""
        return await self._runs.submit_tool_results(self._caller, self.id, results)

    async def messages(self) -> Sequence[Message]:
        """Every message stored in this thread, recorded errors included."""
        return await self._threads.messages(self._caller, self.id)

    async def record(self) -> ThreadRecord:
        """The stored thread record. Raises :class:`ThreadNotFoundError` if there is none."""
        return await self._threads.get(self._caller, self.id)

    async def children(self) -> Sequence[ThreadRecord]:
        """Threads delegated from this one."""
        return await self._threads.children(self._caller, self.id)

    async def delete(self) -> None:
        """Delete the thread (and its delegated threads), cancel their work, dispose instances."""
        await self._threads.delete(self._caller, self.id)

    def __repr__(self) -> str:
        return f"ThreadHandle({self.id!r})"


class AdminClient:
    """Trusted, server-side access to a runtime for one identity."""

    def __init__(self, threads: ThreadOperations, runs: RunOperations, caller: Caller) -> None:
        self._threads = threads
        self._runs = runs
        self._caller = caller

    @property
    def scope_key(self) -> str:
        """The scope key derived from this identity."""
        return self._caller.scope_key

    @property
    def user_key(self) -> str | None:
        """The user key derived from this identity (``create_pai(user_key=...)``); ``None`` when
        the app derives none, or its function failed for this identity."""
        return self._caller.user_key

    async def create_thread(self, *, thread_id: str | None = None) -> ThreadHandle:
        """Create a top-level thread (a fresh id unless you pass one, a non-empty ``str``)."""
        if thread_id is not None:
            check_thread_id(thread_id, "create_thread()")
        record = await self._threads.create(
            self._caller, agent_name=self._threads.agent_name, thread_id=thread_id, parent=None
        )
        return ThreadHandle(self._threads, self._runs, self._caller, record.id)

    def thread(self, thread_id: str) -> ThreadHandle:
        """A handle on an existing thread; a missing id fails on first use, an id that is not a
        non-empty ``str`` at once (:class:`~pai.core.InvalidThreadIdError`)."""
        return ThreadHandle(
            self._threads, self._runs, self._caller, check_thread_id(thread_id, "thread()")
        )

    async def list_threads(self) -> Sequence[ThreadRecord]:
        """This scope's top-level threads, oldest first."""
        return await self._threads.list_threads(self._caller)
