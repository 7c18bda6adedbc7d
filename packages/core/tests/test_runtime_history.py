"""A turn reads only what is new in its thread, and never a stale history."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from helpers import Who, build_agent, build_runtime

from pai.core import AssistantMessage, InMemoryStorage, Message, ModelRequest, UserMessage
from pai.core._lifecycle import HistorySnapshot
from pai.core.ext import ThreadRecord
from pai.core.testing import FunctionModel, text

pytestmark = pytest.mark.anyio

ANN = Who()


class CountingStorage(InMemoryStorage):
    """Counts how many messages each read decoded."""

    def __init__(self) -> None:
        super().__init__()
        self.decoded: list[int] = []

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        messages = await super().get_messages(thread_id, start=start)
        self.decoded.append(len(messages))
        return messages


def echo_model() -> FunctionModel:
    return FunctionModel(lambda request: text(f"seen {len(request.messages)}"))


async def test_each_turn_decodes_only_the_messages_added_since_the_last_turn() -> None:
    storage = CountingStorage()
    runtime = build_runtime(build_agent(model=echo_model()), storage=storage)
    thread = await runtime.admin(identity=ANN).create_thread()

    for _ in range(20):
        await thread.send("hi")

    # The first turn finds an empty thread; every later turn decodes the previous turn's two
    # messages (user, assistant), however long the thread has grown.
    assert storage.decoded == [0] + [2] * 19


async def test_the_model_still_sees_the_whole_history_in_order() -> None:
    seen: list[list[str | None]] = []

    def model(request: ModelRequest) -> AssistantMessage:
        seen.append([getattr(m, "content", None) for m in request.messages])
        return text(f"answer {len(seen)}")

    runtime = build_runtime(build_agent(model=FunctionModel(model)))
    thread = await runtime.admin(identity=ANN).create_thread()

    for word in ("one", "two", "three"):
        await thread.send(word)

    assert seen[-1] == ["one", "answer 1", "two", "answer 2", "three"]


async def test_messages_another_runtime_appended_are_read_on_the_next_turn() -> None:
    storage = InMemoryStorage()
    seen: list[int] = []
    model = FunctionModel(lambda request: (seen.append(len(request.messages)), text("ok"))[1])
    ours = build_runtime(build_agent(model=model), storage=storage)
    theirs = build_runtime(build_agent(model=echo_model()), storage=storage)
    thread = await ours.admin(identity=ANN).create_thread(thread_id="shared")
    await thread.send("first")  # ours has read and cached the thread

    await theirs.admin(identity=ANN).thread("shared").send("from elsewhere")
    await thread.send("again")

    assert seen == [1, 5]  # first; then first, ok, from elsewhere, seen 3, again


async def test_a_thread_deleted_and_created_again_elsewhere_is_not_read_from_the_old_history() -> (
    None
):
    storage = InMemoryStorage()
    seen: list[list[str | None]] = []

    def model(request: ModelRequest) -> AssistantMessage:
        seen.append([getattr(m, "content", None) for m in request.messages])
        return text("ok")

    ours = build_runtime(build_agent(model=FunctionModel(model)), storage=storage)
    thread = await ours.admin(identity=ANN).create_thread(thread_id="reused")
    await thread.send("old conversation")
    # Another process deletes the thread and starts a new one under the same id, with as many
    # messages as before, so a count alone could not tell them apart.
    await storage.delete_thread("reused")
    await storage.create_thread(ThreadRecord(id="reused", scope_key="acme", agent_name="main"))
    await storage.append_messages(
        "reused", [UserMessage(content="new 1"), UserMessage(content="new 2")]
    )

    await thread.send("new 3")

    assert seen[-1] == ["new 1", "new 2", "new 3"]


async def test_recorded_errors_never_reach_the_model_from_the_cached_history() -> None:
    calls = 0

    def model(request: ModelRequest) -> AssistantMessage:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("model down")
        assert all(m.role != "error" for m in request.messages)
        return text("ok")

    runtime = build_runtime(build_agent(model=FunctionModel(model)))
    thread = await runtime.admin(identity=ANN).create_thread()
    with pytest.raises(RuntimeError, match="model down"):
        await thread.send("hi")

    result = await thread.send("hi again")

    assert result.text == "ok"
    assert [m.role for m in await thread.messages()] == ["error", "user", "assistant"]


async def test_cached_messages_share_their_fields_set_and_still_serialize_and_copy() -> None:
    seen: list[Sequence[Message]] = []

    def model(request: ModelRequest) -> AssistantMessage:
        seen.append(request.messages)
        return text("ok")

    runtime = build_runtime(build_agent(model=FunctionModel(model)))
    thread = await runtime.admin(identity=ANN).create_thread()
    await thread.send("one")
    await thread.send("two")
    await thread.send("three")

    first_user, _, second_user, _, _ = seen[-1]
    # Decoded once into the history cache, messages of one shape share one fields set ...
    assert first_user.__pydantic_fields_set__ is second_user.__pydantic_fields_set__
    # ... which changes nothing a caller can observe:
    assert first_user.model_dump(exclude_unset=True) == {"role": "user", "content": "one"}
    assert first_user == UserMessage(content="one")
    changed = first_user.model_copy(update={"content": "changed"})
    assert changed.__pydantic_fields_set__ is not first_user.__pydantic_fields_set__
    assert second_user.model_dump(exclude_unset=True) == {"role": "user", "content": "two"}


async def test_a_request_a_model_kept_never_changes_as_the_thread_grows() -> None:
    model = echo_model()
    runtime = build_runtime(build_agent(model=model))
    thread = await runtime.admin(identity=ANN).create_thread()

    await thread.send("one")
    first = model.requests[0].messages
    for word in ("two", "three"):
        await thread.send(word)

    assert first == [UserMessage(content="one")]
    assert len(model.requests[2].messages) == 5


def test_a_history_snapshot_reads_as_a_sequence_of_its_messages_only() -> None:
    cached: list[Message] = [UserMessage(content="a"), UserMessage(content="b")]
    snapshot = HistorySnapshot(cached, 2).extended([UserMessage(content="c")])
    cached.append(UserMessage(content="later"))  # the cache grows; the snapshot does not

    contents = ["a", "b", "c"]
    assert [m.content for m in snapshot if isinstance(m, UserMessage)] == contents
    assert len(snapshot) == 3
    assert snapshot == [UserMessage(content=c) for c in contents]
    assert [UserMessage(content=c) for c in contents] == snapshot
    assert snapshot != [UserMessage(content=c) for c in ("a", "b")]
    assert snapshot[-1] == UserMessage(content="c")
    assert snapshot[1:] == [UserMessage(content="b"), UserMessage(content="c")]
    assert list(reversed(snapshot)) == [UserMessage(content=c) for c in reversed(contents)]
    with pytest.raises(IndexError):
        snapshot[3]
