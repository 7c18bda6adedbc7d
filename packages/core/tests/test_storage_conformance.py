"""The storage conformance suite passes on the built-in stores and fails on broken ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pai.core import InMemoryStorage, SqliteStorage, Storage
from pai.core.testing import StorageConformance


class TestInMemoryStorage(StorageConformance):
    def create_storage(self) -> Storage:
        return InMemoryStorage()


class TestSqliteInMemory(StorageConformance):
    def create_storage(self) -> Storage:
        return SqliteStorage(":memory:")


class TestSqliteFile(StorageConformance):
    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path: Path) -> None:
        self.folder = tmp_path
        self.made = 0

    async def create_storage(self) -> Storage:  # async on purpose: both kinds of hook work
        self.made += 1
        return SqliteStorage(self.folder / f"pai-{self.made}.db")

    def reopen(self, storage: Storage) -> Storage:
        assert isinstance(storage, SqliteStorage)
        return SqliteStorage(storage.path)


def test_importing_pai_core_testing_does_not_import_pytest() -> None:
    code = "import sys, pai.core.testing; print('pytest' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# -- the suite can fail -----------------------------------------------------------------------

# Each class breaks one rule of the contract; the suite runs once over all of them (one inner
# pytest session) and each test below checks that the suite failed the class on its rule.
BROKEN_STORES = """
import dataclasses

import anyio.lowlevel

from pai.core import InMemoryStorage
from pai.core.testing import StorageConformance


class NotAtomic(InMemoryStorage):
    async def append_messages(self, thread_id, messages):
        for message in messages:
            await super().append_messages(thread_id, [message])


class Interleaving(InMemoryStorage):
    async def append_messages(self, thread_id, messages):
        for message in messages:
            await anyio.lowlevel.checkpoint()
            await super().append_messages(thread_id, [message])


class ShallowDelete(InMemoryStorage):
    async def delete_thread(self, thread_id):
        if await self.get_thread(thread_id) is None:
            return ()
        del self._threads[thread_id]
        del self._messages[thread_id]
        return (thread_id,)


class IgnoresStart(InMemoryStorage):
    async def get_messages(self, thread_id, *, start=0):
        return await super().get_messages(thread_id)


def lossy(value):
    return value.encode("utf-8", "replace").decode()


class Lossy(InMemoryStorage):
    async def create_thread(self, record):
        await super().create_thread(
            dataclasses.replace(record, id=lossy(record.id), scope_key=lossy(record.scope_key))
        )

    async def get_thread(self, thread_id):
        return await super().get_thread(lossy(thread_id))

    async def list_threads(self, scope_key, *, parent_thread_id=None):
        return await super().list_threads(lossy(scope_key), parent_thread_id=parent_thread_id)

    async def append_messages(self, thread_id, messages):
        await super().append_messages(lossy(thread_id), messages)

    async def get_messages(self, thread_id, *, start=0):
        return await super().get_messages(lossy(thread_id), start=start)

    async def delete_thread(self, thread_id):
        return await super().delete_thread(lossy(thread_id))


class SortsById(InMemoryStorage):
    async def list_threads(self, scope_key, *, parent_thread_id=None):
        found = await super().list_threads(scope_key, parent_thread_id=parent_thread_id)
        return sorted(found, key=lambda record: record.id)


class KeepsObjects(InMemoryStorage):
    def __init__(self):
        super().__init__()
        self.kept = {}

    async def append_messages(self, thread_id, messages):
        await super().append_messages(thread_id, messages)
        self.kept.setdefault(thread_id, []).extend(messages)

    async def get_messages(self, thread_id, *, start=0):
        await super().get_messages(thread_id, start=start)
        return tuple(self.kept.get(thread_id, [])[start:])


class TestNotAtomic(StorageConformance):
    create_storage = NotAtomic


class TestInterleaving(StorageConformance):
    create_storage = Interleaving


class TestShallowDelete(StorageConformance):
    create_storage = ShallowDelete


class TestIgnoresStart(StorageConformance):
    create_storage = IgnoresStart


class TestLossy(StorageConformance):
    create_storage = Lossy


class TestSortsById(StorageConformance):
    create_storage = SortsById


class TestKeepsObjects(StorageConformance):
    create_storage = KeepsObjects


class TestWithoutReopen(StorageConformance):
    create_storage = InMemoryStorage
"""


class _Failures:
    """Collects the failed tests of the inner session: test name -> class, and their reports."""

    def __init__(self) -> None:
        self.failed: dict[str, set[str]] = {}
        self.passed = 0
        self.reports: list[str] = []
        self.skipped: dict[str, dict[str, str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        *_, cls, test = report.nodeid.split("::")
        if report.skipped:
            reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
            self.skipped.setdefault(cls, {})[test.split("[")[0]] = reason
            return
        if report.when != "call" and not report.failed:
            return
        if report.failed:
            self.failed.setdefault(cls, set()).add(test.split("[")[0])
            self.reports.append(report.longreprtext)
        elif report.when == "call" and report.passed:
            self.passed += 1


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> _Failures:
    """The suite run once against every broken store, on asyncio."""
    folder = tmp_path_factory.mktemp("broken")
    (folder / "test_broken_stores.py").write_text(BROKEN_STORES, encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    failures = _Failures()
    options = ["-c", str(folder / "pytest.ini"), "--rootdir", str(folder), "-q", "-k", "asyncio"]
    pytest.main(
        [str(folder), *options, "-p", "anyio", "-p", "no:cacheprovider"], plugins=[failures]
    )
    assert failures.passed > 0, "the broken stores' suite ran no test"
    return failures


def test_suite_catches_appends_that_are_not_atomic(broken: _Failures) -> None:
    assert broken.failed["TestNotAtomic"] == {
        "test_a_batch_with_an_unserializable_message_stores_none_of_it"
    }


def test_suite_catches_batches_that_interleave_under_concurrency(broken: _Failures) -> None:
    assert {
        "test_concurrent_appends_to_one_thread_lose_nothing_and_keep_each_batch_whole",
        "test_a_batch_with_an_unserializable_message_stores_none_of_it",
    } <= broken.failed["TestInterleaving"]


def test_suite_catches_a_delete_that_leaves_descendants(broken: _Failures) -> None:
    assert {
        "test_delete_removes_descendants_at_any_depth_and_their_messages_parent_first",
        "test_deleting_a_child_leaves_its_parent",
    } <= broken.failed["TestShallowDelete"]


def test_suite_catches_reads_that_ignore_start(broken: _Failures) -> None:
    assert {
        "test_get_messages_from_start_returns_only_what_follows",
        "test_get_messages_with_a_negative_start_is_a_value_error",
        "test_an_incremental_reader_sees_every_message_once_in_order_during_appends",
    } <= broken.failed["TestIgnoresStart"]


def test_suite_catches_a_lossy_string_encoding(broken: _Failures) -> None:
    assert broken.failed["TestLossy"] == {
        "test_lone_surrogates_round_trip_exactly_in_every_field",
        "test_ids_differing_only_by_characters_a_lossy_encoding_merges_stay_distinct",
    }


def test_suite_catches_list_threads_out_of_creation_order(broken: _Failures) -> None:
    assert (
        "test_list_threads_returns_top_level_threads_of_the_scope_in_creation_order"
        in (broken.failed["TestSortsById"])
    )


def test_suite_catches_a_store_that_keeps_the_callers_objects(broken: _Failures) -> None:
    assert {
        "test_stored_messages_do_not_change_when_the_caller_mutates_its_values",
        "test_messages_read_are_not_changed_by_a_reader_mutating_an_earlier_read",
    } <= broken.failed["TestKeepsObjects"]


def test_suite_skips_durability_saying_why_when_reopen_is_not_implemented(
    broken: _Failures,
) -> None:
    assert "TestWithoutReopen" not in broken.failed
    reason = broken.skipped["TestWithoutReopen"][
        "test_a_new_instance_reads_what_a_closed_one_wrote"
    ]
    assert "does not implement reopen(storage)" in reason
