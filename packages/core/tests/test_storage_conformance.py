"""The storage conformance suite passes on the built-in stores and fails on broken ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pai.core import InMemoryStorage, SqliteStorage
from pai.core.ext import Storage
from pai.core.testing import StorageConformance

pytest_plugins = ["pytester"]


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

    def open_second(self, storage: Storage) -> Storage:
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
import itertools
from datetime import UTC, datetime

import anyio.lowlevel

from pai.core import InMemoryStorage
from pai.core.testing import StorageConformance


class NotAtomic(InMemoryStorage):
    async def append_messages(self, thread_id, messages, *, lease=None):
        for message in messages:
            await super().append_messages(thread_id, [message], lease=lease)


class Interleaving(InMemoryStorage):
    async def append_messages(self, thread_id, messages, *, lease=None):
        for message in messages:
            await anyio.lowlevel.checkpoint()
            await super().append_messages(thread_id, [message], lease=lease)


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

    async def append_messages(self, thread_id, messages, *, lease=None):
        await super().append_messages(lossy(thread_id), messages, lease=lease)

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

    async def append_messages(self, thread_id, messages, *, lease=None):
        await super().append_messages(thread_id, messages, lease=lease)
        self.kept.setdefault(thread_id, []).extend(messages)

    async def get_messages(self, thread_id, *, start=0):
        await super().get_messages(thread_id, start=start)
        return tuple(self.kept.get(thread_id, [])[start:])


class Unfenced(InMemoryStorage):
    async def append_messages(self, thread_id, messages, *, lease=None):
        await super().append_messages(thread_id, messages)


class TokensPerThread(InMemoryStorage):
    async def create_thread(self, record):
        await super().create_thread(record)
        self._tokens = itertools.count(1)  # a counter per thread, restarted with it


class ForgetsInterruptions(InMemoryStorage):
    async def acquire_run(self, thread_id, *, holder, ttl, reclaim=False):
        lease = await super().acquire_run(thread_id, holder=holder, ttl=ttl, reclaim=reclaim)
        return None if lease is None else dataclasses.replace(lease, interrupted=None)


class RacyAcquire(InMemoryStorage):
    async def acquire_run(self, thread_id, *, holder, ttl, reclaim=False):
        entry = self._threads.get(thread_id)
        free = entry is None or entry.lease is None or entry.lease_released
        await anyio.lowlevel.checkpoint()  # between the check and the write: a race
        if free and entry is not None:
            entry.lease = None
        return await super().acquire_run(thread_id, holder=holder, ttl=ttl, reclaim=reclaim)


class ReclaimsAnyHolder(InMemoryStorage):
    async def acquire_run(self, thread_id, *, holder, ttl, reclaim=False):
        entry = self._threads.get(thread_id)
        if reclaim and entry is not None and entry.lease is not None:
            entry.lease = dataclasses.replace(entry.lease, holder=holder)  # holder not compared
        return await super().acquire_run(thread_id, holder=holder, ttl=ttl, reclaim=reclaim)


class ReclaimKeepsTheToken(InMemoryStorage):
    async def acquire_run(self, thread_id, *, holder, ttl, reclaim=False):
        entry = self._threads.get(thread_id)
        held = None if entry is None or entry.lease_released else entry.lease
        lease = await super().acquire_run(thread_id, holder=holder, ttl=ttl, reclaim=reclaim)
        if reclaim and lease is not None and held is not None and held.holder == holder:
            lease = dataclasses.replace(lease, token=held.token)  # the old lease stays current
            entry.lease = lease
        return lease


class NoBlobs(InMemoryStorage):
    put_blob = get_blob = delete_blobs = None  # not a BlobStore


class LikePrefix(InMemoryStorage):
    async def delete_blobs(self, thread_id, prefix):
        import re

        pattern = re.compile(re.escape(prefix).replace("%", ".*").replace("_", "."), re.S)
        entry = self._threads.get(thread_id)
        doomed = [key for key in (entry.blobs if entry else ()) if pattern.match(key)]
        for key in doomed:
            del entry.blobs[key]
        return len(doomed)


class NeverExpires(InMemoryStorage):
    def __init__(self):
        super().__init__(clock=lambda: datetime(2024, 1, 1, tzinfo=UTC))


class TestUnfenced(StorageConformance):
    create_storage = Unfenced


class TestTokensPerThread(StorageConformance):
    create_storage = TokensPerThread


class TestForgetsInterruptions(StorageConformance):
    create_storage = ForgetsInterruptions


class TestRacyAcquire(StorageConformance):
    create_storage = RacyAcquire


class TestReclaimsAnyHolder(StorageConformance):
    create_storage = ReclaimsAnyHolder


class TestReclaimKeepsTheToken(StorageConformance):
    create_storage = ReclaimKeepsTheToken


class TestNeverExpires(StorageConformance):
    create_storage = NeverExpires


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


class TestNoBlobs(StorageConformance):
    create_storage = NoBlobs


class TestLikePrefix(StorageConformance):
    create_storage = LikePrefix
"""


class _Outcome:
    """What the suite did to one broken store's class: failed and skipped test names."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: set[str] = set()
        self.skipped: dict[str, str] = {}
        self.reports: list[str] = []


_outcomes: dict[str, _Outcome] = {}
"""Per broken store's class, from the one inner run that the first test to ask makes."""


def run_suite(pytester: pytest.Pytester, class_name: str) -> _Outcome:
    """The suite's outcome on one broken store's class (all run once, on asyncio, for speed)."""
    if not _outcomes:
        pytester.makepyfile(test_broken_stores=BROKEN_STORES)
        recorder = pytester.inline_run("-k", "asyncio", "-p", "no:cacheprovider")
        passed, skipped, failed = recorder.listoutcomes()
        for report in passed:
            _outcome_of(report).passed += 1
        for report in failed:
            _outcome_of(report).failed.add(_test_name(report))
            _outcome_of(report).reports.append(report.longreprtext)
        for report in skipped:
            reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
            _outcome_of(report).skipped[_test_name(report)] = reason
    outcome = _outcomes[class_name]
    assert outcome.passed > 0, f"the suite ran no passing test on {class_name}"
    return outcome


def _outcome_of(report: pytest.TestReport | pytest.CollectReport) -> _Outcome:
    return _outcomes.setdefault(report.nodeid.split("::")[-2], _Outcome())


def _test_name(report: pytest.TestReport | pytest.CollectReport) -> str:
    return report.nodeid.split("::")[-1].split("[")[0]


def test_suite_catches_appends_that_are_not_atomic(pytester: pytest.Pytester) -> None:
    assert run_suite(pytester, "TestNotAtomic").failed == {
        "test_a_batch_with_an_unserializable_message_stores_none_of_it"
    }


def test_suite_catches_batches_that_interleave_under_concurrency(pytester: pytest.Pytester) -> None:
    assert {
        "test_concurrent_appends_to_one_thread_lose_nothing_and_keep_each_batch_whole",
        "test_a_batch_with_an_unserializable_message_stores_none_of_it",
    } <= run_suite(pytester, "TestInterleaving").failed


def test_suite_catches_a_delete_that_leaves_descendants(pytester: pytest.Pytester) -> None:
    assert {
        "test_delete_removes_descendants_at_any_depth_and_their_messages_parent_first",
        "test_deleting_a_child_leaves_its_parent",
    } <= run_suite(pytester, "TestShallowDelete").failed


def test_suite_catches_reads_that_ignore_start(pytester: pytest.Pytester) -> None:
    assert {
        "test_get_messages_from_start_returns_only_what_follows",
        "test_get_messages_with_a_negative_start_is_a_value_error",
        "test_an_incremental_reader_sees_every_message_once_in_order_during_appends",
    } <= run_suite(pytester, "TestIgnoresStart").failed


def test_suite_catches_a_lossy_string_encoding(pytester: pytest.Pytester) -> None:
    assert run_suite(pytester, "TestLossy").failed == {
        "test_lone_surrogates_round_trip_exactly_in_every_field",
        "test_ids_differing_only_by_characters_a_lossy_encoding_merges_stay_distinct",
    }


def test_suite_catches_list_threads_out_of_creation_order(pytester: pytest.Pytester) -> None:
    assert "test_list_threads_returns_top_level_threads_of_the_scope_in_creation_order" in (
        run_suite(pytester, "TestSortsById").failed
    )


def test_suite_catches_a_store_that_keeps_the_callers_objects(pytester: pytest.Pytester) -> None:
    assert {
        "test_stored_messages_do_not_change_when_the_caller_mutates_its_values",
        "test_messages_read_are_not_changed_by_a_reader_mutating_an_earlier_read",
    } <= run_suite(pytester, "TestKeepsObjects").failed


def test_suite_skips_durability_saying_why_when_reopen_is_not_implemented(
    pytester: pytest.Pytester,
) -> None:
    outcome = run_suite(pytester, "TestWithoutReopen")
    assert outcome.failed == set()
    reason = outcome.skipped["test_a_new_instance_reads_what_a_closed_one_wrote"]
    assert "does not implement reopen(storage)" in reason


def test_suite_catches_appends_that_ignore_the_lease(pytester: pytest.Pytester) -> None:
    assert run_suite(pytester, "TestUnfenced").failed == {
        "test_an_append_with_the_current_lease_stores_and_with_a_stale_one_stores_nothing",
        "test_tokens_grow_across_a_thread_deleted_and_created_again",
        "test_a_reclaimed_lease_is_fenced_and_its_release_does_nothing",
        "test_concurrent_reclaims_by_one_holder_each_get_a_token_the_last_one_current",
    }


def test_suite_catches_tokens_reused_after_a_thread_is_created_again(
    pytester: pytest.Pytester,
) -> None:
    assert run_suite(pytester, "TestTokensPerThread").failed == {
        "test_tokens_grow_across_a_thread_deleted_and_created_again"
    }


def test_suite_catches_a_takeover_that_does_not_name_the_interrupted_holder(
    pytester: pytest.Pytester,
) -> None:
    assert run_suite(pytester, "TestForgetsInterruptions").failed == {
        "test_an_expired_lease_is_taken_over_naming_the_interrupted_holder",
        "test_reclaim_when_nothing_is_live_acquires_as_usual",
    }


def test_suite_catches_two_concurrent_acquires_both_winning(pytester: pytest.Pytester) -> None:
    assert "test_concurrent_acquires_let_exactly_one_win" in (
        run_suite(pytester, "TestRacyAcquire").failed
    )


def test_suite_catches_a_reclaim_that_takes_another_holders_lease(
    pytester: pytest.Pytester,
) -> None:
    assert {
        "test_reclaim_does_not_take_a_live_lease_of_another_holder",
        "test_reclaim_when_nothing_is_live_acquires_as_usual",
    } <= run_suite(pytester, "TestReclaimsAnyHolder").failed


def test_suite_catches_a_reclaim_that_keeps_the_old_token(pytester: pytest.Pytester) -> None:
    assert {
        "test_reclaim_takes_a_live_lease_of_the_same_holder_with_a_greater_token",
        "test_a_reclaimed_lease_is_fenced_and_its_release_does_nothing",
        "test_concurrent_reclaims_by_one_holder_each_get_a_token_the_last_one_current",
    } <= run_suite(pytester, "TestReclaimKeepsTheToken").failed


def test_suite_catches_leases_that_never_expire(pytester: pytest.Pytester) -> None:
    assert {
        "test_an_expired_lease_is_taken_over_naming_the_interrupted_holder",
        "test_a_stale_release_does_not_free_the_current_lease",
        "test_renewing_a_lease_taken_over_or_released_raises_lease_lost",
    } <= run_suite(pytester, "TestNeverExpires").failed


def test_suite_skips_blobs_saying_why_for_a_storage_without_blob_store(
    pytester: pytest.Pytester,
) -> None:
    outcome = run_suite(pytester, "TestNoBlobs")
    assert outcome.failed == set()
    blob_tests = {name: why for name, why in outcome.skipped.items() if "blob" in name}
    assert len(blob_tests) >= 8, outcome.skipped
    for reason in blob_tests.values():
        assert "does not implement BlobStore" in reason or "does not implement reopen" in reason


def test_suite_catches_a_prefix_delete_that_treats_percent_and_underscore_as_wildcards(
    pytester: pytest.Pytester,
) -> None:
    assert run_suite(pytester, "TestLikePrefix").failed == {
        "test_deleting_blobs_by_prefix_counts_and_leaves_the_rest"
    }
