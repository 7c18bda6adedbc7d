"""The binding conformance suite passes on a correct binding and fails on broken ones."""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Hashable
from typing import Any

import pytest

from pai.core import (
    AcquireInput,
    CapabilityBinding,
    CapabilityScope,
    DisposeInput,
    create_capability_binding,
    define_capability,
)
from pai.core.testing import CapabilityBindingConformance

pytest_plugins = ["pytester"]


class Counter:
    """A lazy facade: the counter behind a key exists only once something increments it."""

    def __init__(self, key: str, store: dict[str, int], ids: dict[str, int]) -> None:
        self._key, self._store, self._ids = key, store, ids

    async def increment(self) -> int:
        if self._key not in self._ids:
            self._ids[self._key] = len(self._ids) + 1
            self._store[self._key] = 0
        self._store[self._key] += 1
        return self._ids[self._key]


counter = define_capability(Counter, id="test.counter")


def counter_binding(
    scope: CapabilityScope,
) -> tuple[CapabilityBinding[Counter], dict[str, int], dict[str, int]]:
    store: dict[str, int] = {}
    ids: dict[str, int] = {}

    def acquire(input: AcquireInput) -> Counter:
        return Counter(input.key, store, ids)

    def dispose(input: DisposeInput) -> None:
        store.pop(input.key, None)

    return (
        create_capability_binding(
            capability=counter, scope=scope, acquire=acquire, dispose=dispose
        ),
        store,
        ids,
    )


class TestReferenceBinding(CapabilityBindingConformance):
    """A correct in-process binding passes every check."""

    def create_binding(self, scope: CapabilityScope) -> CapabilityBinding[Any]:
        binding, self.store, self.ids = counter_binding(scope)
        return binding

    async def use(self, facade: Counter) -> Hashable:
        return await facade.increment()

    async def live_resources(self, binding: CapabilityBinding[Any]) -> Collection[Hashable]:
        return [ident for key, ident in self.ids.items() if key in self.store]


BROKEN_SUITE = """
from collections.abc import Hashable
import itertools
from pai.core import create_capability_binding, define_capability
from pai.core.testing import CapabilityBindingConformance

class Box:
    def __init__(self, ident):
        self.ident = ident

box = define_capability(Box, id="test.box")

class TestBroken(CapabilityBindingConformance):
    anyio_backend = None  # replaced below

    def create_binding(self, scope):
        self.made = []
        counter = itertools.count(1)
        def acquire(input):
            {acquire_body}
        def dispose(input):
            {dispose_body}
        return create_capability_binding(capability=box, scope=scope, acquire=acquire, dispose=dispose)

    async def use(self, facade):
        return facade.ident

    async def live_resources(self, binding):
        return list(self.made)
"""


def _run_broken(pytester: pytest.Pytester, acquire_body: str, dispose_body: str) -> set[str]:
    source = BROKEN_SUITE.format(acquire_body=acquire_body, dispose_body=dispose_body)
    source = source.replace("    anyio_backend = None  # replaced below\n", "")
    pytester.makepyfile(test_broken=textwrap.dedent(source))
    result = pytester.runpytest_inprocess("-p", "anyio", "-q", "-k", "asyncio")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) > 0, result.stdout.str()
    return {
        line.split("::")[-1].split("[")[0]
        for line in result.stdout.lines
        if line.startswith("FAILED")
    }


def test_suite_catches_a_binding_that_provisions_a_new_resource_per_acquire(
    pytester: pytest.Pytester,
) -> None:
    failed = _run_broken(
        pytester,
        acquire_body="b = Box(next(counter)); self.made.append(b.ident); return b",
        dispose_body="pass",
    )
    assert "test_same_key_gives_the_same_resource" in failed
    assert "test_acquire_provisions_nothing_until_the_facade_is_used" in failed
    assert "test_concurrent_acquires_of_one_key_provision_once" in failed


def test_suite_catches_a_binding_whose_dispose_destroys_everything(
    pytester: pytest.Pytester,
) -> None:
    failed = _run_broken(
        pytester,
        acquire_body=(
            "ident = input.key\n"
            "            self.made.append(ident) if ident not in self.made else None\n"
            "            return Box(ident)"
        ),
        dispose_body="self.made.clear()",
    )
    assert "test_thread_delete_disposes_that_threads_instance_only" in failed
