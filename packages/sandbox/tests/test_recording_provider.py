"""pai.sandbox.testing.RecordingProvider: every call that reaches the wrapped provider and its
instances is recorded, in order, and passed on unchanged."""

from __future__ import annotations

import pytest
from fakes import FakeProvider, Reply

from pai.sandbox import create_sandbox, create_sandbox_session_manager
from pai.sandbox.testing import ProviderCall, RecordingProvider

pytestmark = pytest.mark.anyio


async def test_every_call_through_the_facade_is_recorded_in_order(provider: FakeProvider) -> None:
    recording = RecordingProvider(provider)
    provider.reply(Reply(stdout=b"hi\n"))
    sessions = create_sandbox_session_manager(provider=recording)
    sandbox = create_sandbox(sessions.handle("k"))

    await sandbox.write_files({"a.txt": "a", "b.txt": "b"})
    result = await sandbox.run_command("echo hi")
    assert await sandbox.read_text("a.txt") == "a"
    await recording.destroy("k")

    assert result.stdout == "hi\n"  # passed on, answered by the wrapped provider
    operations = [call.operation for call in recording.calls]
    assert operations[0] in ("find", "create")
    assert operations[-1] == "destroy"
    assert recording.calls_to("run") == [ProviderCall("run", "k", ("echo hi",))]
    assert [call.key for call in recording.calls_to("write_files")] == ["k"]
    assert recording.files_written() == 2
    assert provider.destroys == ["k"]
