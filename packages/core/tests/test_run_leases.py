"""Runs on one thread never overlap: every run holds the thread's run lease.

Two runtimes on one SQLite file stand for two processes here (each has its own storage object
over the file, and nothing in the runtime lets one see the other but the storage); a real
two-process test is in ``test_run_leases_processes.py``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

import pai.core._leases
from pai.core import (
    AcquireInput,
    AgentRuntime,
    AssistantMessage,
    ConfigError,
    DefinitionError,
    DisposeInput,
    ErrorMessage,
    InMemoryStorage,
    Message,
    ModelRequest,
    RunLeaseLostError,
    SqliteStorage,
    StorageError,
    ThreadBusyError,
    ThreadDeletedError,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    create_agent_runtime,
    create_capability_binding,
    define_agent,
    define_capability,
    define_command,
    define_tool,
    load_config,
)
from pai.core.ext import RunLease, Storage
from pai.core.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio


class Box:
    """The facade of the thread-scoped test capability: the instance behind a key."""

    def __init__(self, registry: dict[str, str], key: str, owner: str) -> None:
        self._registry = registry
        self._key = key
        self._owner = owner

    def use(self) -> str:
        return self._registry.setdefault(self._key, f"made by {self._owner}")


box = define_capability(Box, id="box", description="an instance per thread, found by key")


class Work(BaseModel):
    label: str = ""


Body = Callable[[str], Awaitable[None]]


def work_tool(body: Body | None = None) -> Any:
    """A tool that runs ``body(label)`` (a while, or until the test lets it go)."""

    async def execute(ctx: ToolContext[Work]) -> str:
        ctx.capabilities.box.use()
        if body is not None:
            await body(ctx.input.label)
        return f"worked {ctx.input.label}"

    return define_tool(
        id="work",
        description="work for a while",
        input_schema=Work,
        capabilities={"box": box},
        execute=execute,
    )


async def one_tool_call_per_run(request: ModelRequest) -> AssistantMessage:
    """A user message gets a call of ``work``; its result gets the final answer. It takes a
    moment, as a model does: other runs go on meanwhile (and would slip in between this run's
    steps, if they could)."""
    await anyio.sleep(0.001)
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        return tool_call("work", {"label": last.content})
    assert isinstance(last, ToolResultMessage)
    return text(f"done {last.content}")


def runtime_on(
    storage: Storage,
    *,
    owner: str = "A",
    body: Body | None = None,
    registry: dict[str, str] | None = None,
    disposed: list[tuple[str, str]] | None = None,
    model: Callable[[ModelRequest], Any] = one_tool_call_per_run,
    **options: Any,
) -> AgentRuntime:
    """A runtime whose one tool uses a thread-scoped instance kept in ``registry`` by key (as a
    provider keeps containers by label): any runtime finds it, and can dispose it."""
    shared = registry if registry is not None else {}

    def acquire(input: AcquireInput) -> Box:
        return Box(shared, input.key, owner)

    def dispose(input: DisposeInput) -> None:
        instance = shared.pop(input.key, None)
        if disposed is not None and instance is not None:
            disposed.append((owner, instance))

    return create_agent_runtime(
        agent=define_agent(
            name="writer", model=FunctionModel(model), tools={"work": work_tool(body)}
        ),
        storage=storage,
        scope_key=lambda identity: "acme",
        capabilities={
            "box": create_capability_binding(
                capability=box, scope="thread", acquire=acquire, dispose=dispose
            )
        },
        **options,
    )


def runs_in(messages: Sequence[Message]) -> list[str]:
    """The labels of the complete runs in a thread, in order; fails on a run that is split or
    interleaved with another (each run: user, tool call, its result, the answer)."""
    labels: list[str] = []
    rest = [m for m in messages if not isinstance(m, ErrorMessage)]
    assert len(rest) % 4 == 0, rest
    for index in range(0, len(rest), 4):
        user, call, result, answer = rest[index : index + 4]
        assert isinstance(user, UserMessage), rest
        assert isinstance(call, AssistantMessage), rest
        assert call.tool_calls[0].arguments == {"label": user.content}, rest
        assert isinstance(result, ToolResultMessage), rest
        assert result.tool_call_id == call.tool_calls[0].id, rest
        assert result.content == f"worked {user.content}", rest
        assert answer == AssistantMessage(content=f"done worked {user.content}"), rest
        labels.append(user.content)
    return labels


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "threads.db"


# -- one process, one runtime -----------------------------------------------------------------


async def test_a_second_send_starts_as_soon_as_the_first_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With polling made useless, only this runtime's own release can start the second run.
    monkeypatch.setattr(pai.core._leases, "_FIRST_PAUSE", 3600.0)
    monkeypatch.setattr(pai.core._leases, "_LONGEST_PAUSE", 3600.0)
    first_working, let_first_go = anyio.Event(), anyio.Event()

    async def body(label: str) -> None:
        if label == "first":
            first_working.set()
            await let_first_go.wait()

    async with runtime_on(InMemoryStorage(), body=body) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(thread.send, "first")
                await first_working.wait()
                tg.start_soon(thread.send, "second")
                await anyio.wait_all_tasks_blocked()
                assert runtime.active_operations(thread.id) == 2
                let_first_go.set()

        assert runs_in(await thread.messages()) == ["first", "second"]


async def test_concurrent_sends_in_one_runtime_run_one_after_another(db: Path) -> None:
    async def body(label: str) -> None:
        await anyio.sleep(0.01)

    async with runtime_on(SqliteStorage(db), body=body) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(thread.send, f"m{n}")

        assert sorted(runs_in(await thread.messages())) == [f"m{n}" for n in range(8)]


async def test_a_command_does_not_wait_for_a_run() -> None:
    working, let_go = anyio.Event(), anyio.Event()

    async def body(label: str) -> None:
        working.set()
        await let_go.wait()

    class NoInput(BaseModel):
        pass

    ping = define_command(input=NoInput, run=lambda ctx: "pong")
    runtime = create_agent_runtime(
        agent=define_agent(
            name="writer",
            model=FunctionModel(one_tool_call_per_run),
            tools={"work": work_tool(body)},
            commands={"ping": ping},
        ),
        storage=InMemoryStorage(),
        scope_key=lambda identity: "acme",
        capabilities={
            "box": create_capability_binding(
                capability=box, acquire=lambda input: Box({}, input.key, "A")
            )
        },
        busy_thread_wait=0,
    )
    async with runtime:
        thread = await runtime.admin(identity=None).create_thread()
        async with anyio.create_task_group() as tg:
            tg.start_soon(thread.send, "long")
            await working.wait()
            assert await thread.commands.ping() == "pong"
            let_go.set()


# -- two runtimes on one SQLite file, as two processes ----------------------------------------


async def test_two_runtimes_sending_to_one_thread_keep_every_run_whole(db: Path) -> None:
    async def body(label: str) -> None:
        await anyio.sleep(0.02)  # a tool that takes a while: the other runtime's sends wait

    a = runtime_on(SqliteStorage(db), owner="A", body=body)
    b = runtime_on(SqliteStorage(db), owner="B", body=body)
    async with a, b:
        thread = await a.admin(identity=None).create_thread()

        async def sends(runtime: AgentRuntime, name: str) -> None:
            handle = runtime.admin(identity=None).thread(thread.id)
            for n in range(6):
                await handle.send(f"{name}{n}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(sends, a, "a")
            tg.start_soon(sends, b, "b")

        labels = runs_in(await thread.messages())
    assert sorted(labels) == sorted([f"a{n}" for n in range(6)] + [f"b{n}" for n in range(6)])
    assert [x for x in labels if x[0] == "a"] == [f"a{n}" for n in range(6)]
    assert [x for x in labels if x[0] == "b"] == [f"b{n}" for n in range(6)]


async def test_a_thread_held_past_the_wait_raises_thread_busy_naming_thread_wait_and_option(
    db: Path,
) -> None:
    working, let_go = anyio.Event(), anyio.Event()

    async def body(label: str) -> None:
        working.set()
        await let_go.wait()

    a = runtime_on(SqliteStorage(db), body=body)
    b = runtime_on(SqliteStorage(db), busy_thread_wait=0.3)
    async with a, b:
        thread = await a.admin(identity=None).create_thread(thread_id="t-busy")
        refused: list[ThreadBusyError] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(thread.send, "long")
            await working.wait()
            with pytest.raises(ThreadBusyError) as raised:
                await b.admin(identity=None).thread("t-busy").send("refused")
            refused.append(raised.value)
            let_go.set()

        error = refused[0]
        assert error.thread_id == "t-busy"
        assert 0.3 <= error.waited < 5
        message = str(error)
        assert "'t-busy'" in message
        assert f"{error.waited:.1f} s" in message
        assert "busy_thread_wait" in message
        assert runs_in(await thread.messages()) == ["long"], "the refused send stored something"


async def test_a_caller_cancelled_while_it_waits_leaves_the_thread_free(db: Path) -> None:
    working, let_go = anyio.Event(), anyio.Event()

    async def body(label: str) -> None:
        if label == "long":
            working.set()
            await let_go.wait()

    a = runtime_on(SqliteStorage(db), body=body)
    b = runtime_on(SqliteStorage(db), busy_thread_wait=0)
    async with a, b:
        thread = await a.admin(identity=None).create_thread()
        async with anyio.create_task_group() as tg:
            tg.start_soon(thread.send, "long")
            await working.wait()
            with anyio.move_on_after(0.2) as waited:
                await a.admin(identity=None).thread(thread.id).send("given up")
            assert waited.cancelled_caught
            let_go.set()

        # busy_thread_wait=0: this fails at once if anything of the cancelled wait holds on.
        await b.admin(identity=None).thread(thread.id).send("after")
        assert runs_in(await thread.messages()) == ["long", "after"]


async def test_a_thread_deleted_by_another_runtime_cancels_the_run_there_and_disposes_its_instance(
    db: Path,
) -> None:
    ttl = 0.9
    registry: dict[str, str] = {}
    disposed: list[tuple[str, str]] = []
    working = anyio.Event()

    async def body(label: str) -> None:
        working.set()
        await anyio.sleep_forever()

    a = runtime_on(SqliteStorage(db), owner="A", registry=registry, disposed=disposed)
    b = runtime_on(
        SqliteStorage(db),
        owner="B",
        body=body,
        registry=registry,
        disposed=disposed,
        run_lease_ttl=ttl,
    )
    async with a, b:
        thread = await a.admin(identity=None).create_thread()
        deleted_at: list[float] = []

        async def delete_when_working() -> None:
            await working.wait()
            await a.admin(identity=None).thread(thread.id).delete()
            deleted_at.append(anyio.current_time())

        noticed: list[float] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(delete_when_working)
                with pytest.raises(ThreadDeletedError, match="deleted while this run ran"):
                    await b.admin(identity=None).thread(thread.id).send("doomed")
                noticed.append(anyio.current_time())

        assert noticed[0] - deleted_at[0] < ttl / 3 + 1.0, "B noticed the deletion too late"
        assert disposed == [("A", "made by B")], (
            "the thread-scoped instance B made was not disposed by the deleting runtime"
        )
        assert list(await b.storage.get_messages(thread.id)) == []


async def test_a_run_longer_than_the_ttl_keeps_its_thread(db: Path) -> None:
    ttl = 0.3
    other = SqliteStorage(db)

    async def body(label: str) -> None:
        for _ in range(5):  # over three times the ttl, asking the whole time
            await anyio.sleep(ttl / 3)
            assert await other.acquire_run(thread_id, holder="intruder", ttl=30) is None, (
                "another process took the thread of a run that was renewing its lease"
            )

    thread_id = ""
    async with runtime_on(SqliteStorage(db), body=body, run_lease_ttl=ttl) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        thread_id = thread.id
        await thread.send("long")
        assert runs_in(await thread.messages()) == ["long"]
    await other.aclose()


async def test_a_run_after_the_keeper_went_idle_is_renewed_again(db: Path) -> None:
    ttl = 0.3
    other = SqliteStorage(db)
    checks: list[bool] = []

    async def body(label: str) -> None:
        if label == "long":
            for _ in range(5):
                await anyio.sleep(ttl / 3)
                checks.append(await other.acquire_run(thread_id, holder="intruder", ttl=30) is None)

    thread_id = ""
    async with runtime_on(SqliteStorage(db), body=body, run_lease_ttl=ttl) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        thread_id = thread.id
        await thread.send("short")
        await anyio.sleep(ttl)  # past the keeper's idle time: it has ended
        await thread.send("long")
    await other.aclose()

    assert checks == [True] * 5, "a run started after the keeper ended was not renewed"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_keeper_holds_no_asyncio_timer_while_a_run_is_held(db: Path) -> None:
    # asyncio drops a cancelled timer only from the head of its heap: a keeper's wake-up ten
    # seconds ahead would keep every shorter-lived timer cancelled behind it alive (see
    # _keeper_sleep). Whatever the keeper is waiting for, it is not a timer of the loop.
    import asyncio

    far: list[float] = []

    async def body(label: str) -> None:
        await anyio.sleep(0.05)  # the keeper has started and gone to sleep
        loop = asyncio.get_running_loop()
        scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
        far.extend(
            handle.when() - loop.time()
            for handle in scheduled
            if not handle.cancelled() and handle.when() - loop.time() > 1.0
        )

    async with runtime_on(SqliteStorage(db), body=body, run_lease_ttl=30) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("held")
    assert far == [], f"timers this far ahead (s) were pending during the run: {far}"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_closing_the_runtime_ends_its_keeper() -> None:
    import asyncio

    agent = define_agent(name="plain", model=FunctionModel(lambda request: text("hi")))
    async with create_agent_runtime(
        agent=agent, storage=InMemoryStorage(), scope_key=lambda identity: "acme"
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("one")
        keepers = [t for t in asyncio.all_tasks() if t.get_name() == "pai run lease keeper"]
        assert len(keepers) == 1, "the keeper lingers after a run: this test needs it running"
    # Ended, not merely cancelled: until its task runs once more, a cancelled keeper still
    # holds the runtime (and all its storage holds) alive.
    assert keepers[0].done(), "aclose() returned while the run lease keeper was still running"


class FlakyRenewals(SqliteStorage):
    """Renewals fail (as with an unreachable database) while ``failing`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failing = True
        self.renewals = 0

    async def renew_run(self, lease: RunLease, *, ttl: float) -> RunLease:
        self.renewals += 1
        if self.failing:
            raise StorageError("the database cannot be reached (a test)")
        return await super().renew_run(lease, ttl=ttl)


async def test_renewals_that_fail_until_the_lease_expires_lose_the_thread(db: Path) -> None:
    storage = FlakyRenewals(db)
    working = anyio.Event()

    async def body(label: str) -> None:
        working.set()
        await anyio.sleep_forever()

    events: list[str] = []
    runtime = runtime_on(
        storage, body=body, run_lease_ttl=0.4, on_runtime_error=lambda e: events.append(e.message)
    )
    async with runtime:
        thread = await runtime.admin(identity=None).create_thread()
        with anyio.fail_after(10), pytest.raises(RunLeaseLostError) as raised:
            await thread.send("cut off")

        assert storage.renewals >= 2, "a failed renewal was not tried again"
        assert any("renewing the run lease" in event for event in events)
        assert "run_lease_ttl" in str(raised.value)
        assert "Nothing more of this run was stored" in str(raised.value)
        assert list(await thread.messages()) == []


async def test_a_renewal_that_fails_once_is_tried_again_and_the_run_goes_on(db: Path) -> None:
    storage = FlakyRenewals(db)

    async def body(label: str) -> None:
        await anyio.sleep(0.2)
        storage.failing = False
        await anyio.sleep(0.6)

    runtime = runtime_on(storage, body=body, run_lease_ttl=0.45, on_runtime_error=lambda e: None)
    async with runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("survives")

        assert runs_in(await thread.messages()) == ["survives"]
        assert storage.renewals >= 2


class RecordedAppends(SqliteStorage):
    """Records what each append made of its batch: "stored", or the error's name."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.outcomes: list[str] = []

    async def append_messages(
        self, thread_id: str, messages: Sequence[Message], *, lease: RunLease | None = None
    ) -> None:
        try:
            await super().append_messages(thread_id, messages, lease=lease)
        except Exception as error:
            self.outcomes.append(type(error).__name__)
            raise
        self.outcomes.append("stored")


async def test_a_stalled_run_loses_its_thread_and_its_late_step_is_refused(db: Path) -> None:
    stalled = threading.Event()
    outcome: list[BaseException | str] = []
    storage = RecordedAppends(db)

    async def stall(label: str) -> None:
        stalled.set()
        time.sleep(1.5)  # noqa: ASYNC251  # blocks its event loop: no renewal meanwhile

    async def stalled_process() -> None:
        async with runtime_on(storage, body=stall, run_lease_ttl=0.3) as runtime:
            try:
                await runtime.admin(identity=None).thread("t1").send("stalled")
                outcome.append("completed")
            except Exception as error:
                outcome.append(error)

    setup = SqliteStorage(db)
    async with runtime_on(setup) as creator:
        await creator.admin(identity=None).create_thread(thread_id="t1")
    # The stalled runtime has an event loop (and a thread) of its own, as another process.
    worker = threading.Thread(target=anyio.run, args=(stalled_process,))
    worker.start()
    try:
        await anyio.to_thread.run_sync(stalled.wait)
        async with runtime_on(SqliteStorage(db), owner="B", busy_thread_wait=10) as b:
            await b.admin(identity=None).thread("t1").send("took over")
            messages = await b.admin(identity=None).thread("t1").messages()
    finally:
        await anyio.to_thread.run_sync(worker.join)

    assert len(outcome) == 1
    assert isinstance(outcome[0], RunLeaseLostError), outcome
    assert storage.outcomes == ["RunLeaseLostError"], (
        "the stalled run's step was not refused (or something else of it was written)"
    )
    assert isinstance(messages[0], ErrorMessage)
    assert messages[0].error_type == "RunInterrupted"
    assert runs_in(messages) == ["took over"], "something of the stalled run was stored"


async def test_a_run_taking_over_an_expired_lease_records_the_interrupted_run_first(
    db: Path,
) -> None:
    seen: list[Sequence[Message]] = []

    async def model(request: ModelRequest) -> AssistantMessage:
        seen.append(list(request.messages))
        return await one_tool_call_per_run(request)

    storage = SqliteStorage(db)
    async with runtime_on(storage, model=model) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("before")
        # A process that took the thread and died: its lease is never renewed nor released.
        dead = await storage.acquire_run(thread.id, holder="host-1:4242:0badc0de", ttl=0.2)
        assert dead is not None
        seen.clear()

        await thread.send("after")

        messages = list(await thread.messages())
    marker = messages[4]
    assert isinstance(marker, ErrorMessage)
    assert (marker.source, marker.error_type) == ("runtime", "RunInterrupted")
    assert "'host-1:4242:0badc0de'" in marker.message
    assert "completed steps are above" in marker.message
    assert "nothing after them was saved" in marker.message
    assert runs_in(messages) == ["before", "after"]
    assert all(not isinstance(m, ErrorMessage) for request in seen for m in request), (
        "the model was shown the interrupted-run marker"
    )


async def test_a_delegated_run_holds_its_child_threads_lease(db: Path) -> None:
    other = SqliteStorage(db)
    held: list[bool] = []
    parent_answers = iter([tool_call("helper", {"task": "help"}), text("parent done")])

    async def child_model(request: ModelRequest) -> AssistantMessage:
        (child,) = await other.list_threads("acme", parent_thread_id=parent_id[0])
        held.append(await other.acquire_run(child.id, holder="intruder", ttl=30) is None)
        return text("child done")

    helper = define_agent(name="helper", model=FunctionModel(child_model), instructions="help")
    runtime = create_agent_runtime(
        agent=define_agent(
            name="lead",
            model=FunctionModel(lambda request: next(parent_answers)),
            subagents={"helper": helper},
        ),
        storage=SqliteStorage(db),
        scope_key=lambda identity: "acme",
    )
    parent_id: list[str] = []
    async with runtime:
        thread = await runtime.admin(identity=None).create_thread()
        parent_id.append(thread.id)
        result = await thread.send("go")
    await other.aclose()

    assert result.text == "parent done"
    assert held == [True], "another process could take the child thread of a running delegation"


async def test_submit_tool_results_runs_under_the_lease(db: Path) -> None:
    class Question(BaseModel):
        text: str

    ask = define_tool(id="ask", description="ask a person", input_schema=Question)
    answers = iter([tool_call("ask", {"text": "which?"}, id="q1"), text("thanks")])
    runtime = create_agent_runtime(
        agent=define_agent(
            name="writer", model=FunctionModel(lambda request: next(answers)), tools={"ask": ask}
        ),
        storage=SqliteStorage(db),
        scope_key=lambda identity: "acme",
        busy_thread_wait=0.2,
    )
    other = SqliteStorage(db)
    async with runtime:
        thread = await runtime.admin(identity=None).create_thread()
        first = await thread.send("start")
        assert first.status == "awaiting_tool_results"
        lease = await other.acquire_run(thread.id, holder="elsewhere", ttl=30)
        assert lease is not None

        with pytest.raises(ThreadBusyError):
            await thread.submit_tool_results({"q1": "this one"})
        await other.release_run(lease)
        done = await thread.submit_tool_results({"q1": "this one"})
    await other.aclose()

    assert done.text == "thanks"


# -- options ----------------------------------------------------------------------------------


def test_the_options_default_to_30_and_60_seconds() -> None:
    runtime = runtime_on(InMemoryStorage())

    assert (runtime.run_lease_ttl, runtime.busy_thread_wait) == (30.0, 60.0)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("run_lease_ttl", 0),
        ("run_lease_ttl", -1),
        ("run_lease_ttl", math.inf),
        ("run_lease_ttl", "30"),
        ("busy_thread_wait", -0.5),
        ("busy_thread_wait", math.nan),
        ("busy_thread_wait", True),
    ],
)
def test_an_option_that_is_not_a_number_of_seconds_is_a_definition_error(
    option: str, value: object
) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(DefinitionError, match=rf"{option} must be a number of seconds"):
        runtime_on(InMemoryStorage(), **options)


def test_the_options_come_from_the_storage_table_when_code_does_not_set_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "pai.toml").write_text(
        '[storage]\nurl = "memory://"\nrun_lease_ttl = 5\nbusy_thread_wait = 2.5\n'
    )
    config = load_config(tmp_path, environ={"PAI_STORAGE__BUSY_THREAD_WAIT": "7"})

    from_config = runtime_on(InMemoryStorage(), config=config)
    from_code = runtime_on(InMemoryStorage(), config=config, run_lease_ttl=9)

    assert (from_config.run_lease_ttl, from_config.busy_thread_wait) == (5.0, 7.0)
    assert (from_code.run_lease_ttl, from_code.busy_thread_wait) == (9.0, 7.0)


def test_a_storage_table_with_only_the_options_keeps_the_default_storage(tmp_path: Path) -> None:
    (tmp_path / "pai.toml").write_text("[storage]\nrun_lease_ttl = 12\n")

    runtime = create_agent_runtime(
        agent=define_agent(name="writer", model=FunctionModel(one_tool_call_per_run)),
        scope_key=lambda identity: "acme",
        config=load_config(tmp_path, environ={}),
    )

    assert isinstance(runtime.storage, SqliteStorage)
    assert runtime.run_lease_ttl == 12.0


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('run_lease_ttl = "soon"', "run_lease_ttl = 'soon'"),
        ("run_lease_ttl = 0", "number of seconds > 0"),
        ("busy_thread_wait = -1", "number of seconds >= 0"),
    ],
)
def test_a_bad_option_in_the_storage_table_is_a_config_error_naming_the_file(
    tmp_path: Path, line: str, says: str
) -> None:
    (tmp_path / "pai.toml").write_text(f"[storage]\n{line}\n")

    with pytest.raises(ConfigError) as raised:
        runtime_on(InMemoryStorage(), config=load_config(tmp_path, environ={}))

    assert says in str(raised.value)
    assert str(tmp_path / "pai.toml") in str(raised.value)


def test_a_misspelt_option_in_the_storage_table_suggests_the_right_one(tmp_path: Path) -> None:
    (tmp_path / "pai.toml").write_text("[storage]\nrun_lease_tll = 5\n")

    with pytest.raises(ConfigError, match="did you mean 'run_lease_ttl'"):
        create_agent_runtime(
            agent=define_agent(name="writer", model=FunctionModel(one_tool_call_per_run)),
            scope_key=lambda identity: "acme",
            config=load_config(tmp_path, environ={}),
        )
