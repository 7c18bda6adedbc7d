"""Capability tokens (define_capability) and bindings (create_capability_binding)."""

from __future__ import annotations

import inspect
from typing import Any, Protocol, cast

import pytest

from pai.core import (
    AcquireInput,
    Capability,
    CapabilityBinding,
    CapabilityScopeInput,
    DefinitionError,
    DisposeInput,
    create_capability_binding,
    define_capability,
)
from pai.core._scope import SCOPE_KINDS


class Sandbox(Protocol):
    def run(self, command: str) -> str: ...


class FakeSandbox:
    def __init__(self, key: str) -> None:
        self.key = key

    def run(self, command: str) -> str:
        return f"{self.key}: {command}"


sandbox = define_capability(Sandbox, id="sandbox", description="Runs commands.")


def acquire_input(key: str = "pai1.thread.sandbox.s.t") -> AcquireInput:
    return AcquireInput(
        key=key,
        capability_id="sandbox",
        scope="thread",
        thread_id="t",
        root_thread_id=None,
        scope_key="s",
        user_key=None,
        identity=None,
    )


def dispose_input(key: str = "pai1.thread.sandbox.s.t") -> DisposeInput:
    return DisposeInput(reason="thread-deleted", key=key, thread_id="t", capability_id="sandbox")


def untyped(value: object) -> Any:
    """Hide a deliberately wrong argument from the type checker: these tests check run time."""
    return cast(Any, value)


# -- define_capability -------------------------------------------------------------------------


def test_define_capability_returns_a_token_with_facade_id_and_description() -> None:
    token = define_capability(Sandbox, id="sandbox", description="Runs commands.")

    assert isinstance(token, Capability)
    assert token.facade is Sandbox
    assert token.id == "sandbox"
    assert token.description == "Runs commands."


def test_define_capability_description_defaults_to_none() -> None:
    assert define_capability(Sandbox, id="sandbox").description is None


def test_define_capability_accepts_a_concrete_class_as_the_facade() -> None:
    assert define_capability(FakeSandbox, id="sandbox").facade is FakeSandbox


def test_capability_repr_names_the_id_and_the_facade() -> None:
    assert repr(sandbox) == f"Capability(id='sandbox', facade={__name__}.Sandbox)"


@pytest.mark.parametrize(
    "capability_id",
    [
        "sandbox",
        "browser",
        "db",
        "a",
        "sandbox2",
        "my-cap",
        "my_cap",
        "acme.vault",
        "acme.vault.v2",
    ],
)
def test_define_capability_accepts_bare_and_dotted_prefixed_ids(capability_id: str) -> None:
    assert define_capability(Sandbox, id=capability_id).id == capability_id


@pytest.mark.parametrize(
    "capability_id",
    [
        "",
        "Sandbox",
        "sandBox",
        "1sandbox",
        "-sandbox",
        "_sandbox",
        "acme.",
        ".acme",
        "acme..vault",
        "acme.Vault",
        "acme.1vault",
        "acme/vault",
        "sand box",
        "sandbox\n",
        "sändbox",
        "acme:vault",
    ],
)
def test_define_capability_rejects_a_malformed_id_naming_it_and_showing_a_valid_one(
    capability_id: str,
) -> None:
    with pytest.raises(DefinitionError) as caught:
        define_capability(Sandbox, id=capability_id)

    message = str(caught.value)
    assert repr(capability_id) in message
    assert "'sandbox'" in message
    assert "'acme.vault'" in message


def test_define_capability_rejects_a_non_string_id() -> None:
    with pytest.raises(DefinitionError, match="capability id 42 is not valid"):
        define_capability(Sandbox, id=untyped(42))


@pytest.mark.parametrize("facade", [FakeSandbox("k"), "Sandbox", None, list[int]], ids=repr)
def test_define_capability_rejects_a_facade_that_is_not_a_type(facade: object) -> None:
    with pytest.raises(DefinitionError, match="facade type") as caught:
        define_capability(untyped(facade), id="sandbox")

    assert repr(facade) in str(caught.value)


def test_definition_error_is_a_value_error() -> None:
    # Callers that catch ValueError for bad arguments keep working.
    with pytest.raises(ValueError, match="not valid"):
        define_capability(Sandbox, id="Bad")


# -- create_capability_binding: construction --------------------------------------------------


def test_create_capability_binding_returns_a_binding_for_the_token() -> None:
    binding = create_capability_binding(capability=sandbox, acquire=lambda i: FakeSandbox(i.key))

    assert isinstance(binding, CapabilityBinding)
    assert binding.capability is sandbox


def test_binding_scope_defaults_to_thread() -> None:
    binding = create_capability_binding(capability=sandbox, acquire=lambda i: FakeSandbox(i.key))

    assert binding.scope == "thread"


@pytest.mark.parametrize("scope", SCOPE_KINDS)
def test_binding_accepts_every_built_in_scope(scope: Any) -> None:
    binding = create_capability_binding(
        capability=sandbox, scope=scope, acquire=lambda i: FakeSandbox(i.key)
    )

    assert binding.scope == scope


def test_built_in_scopes_are_exactly_the_five_the_reference_names() -> None:
    assert set(SCOPE_KINDS) == {"thread", "rootThread", "user", "scope", "global"}


def test_binding_accepts_a_custom_scope_function_and_keeps_it_as_is() -> None:
    def per_user(s: CapabilityScopeInput) -> str:
        return f"{s.scope_key}/{s.user_key}"

    binding = create_capability_binding(
        capability=sandbox, scope=per_user, acquire=lambda i: FakeSandbox(i.key)
    )

    assert binding.scope is per_user


@pytest.mark.parametrize("scope", ["Thread", "root_thread", "roothread", "session", "", None, 3])
def test_binding_rejects_an_unknown_scope_naming_it_and_the_valid_ones(scope: object) -> None:
    with pytest.raises(DefinitionError) as caught:
        create_capability_binding(
            capability=sandbox, scope=untyped(scope), acquire=lambda i: FakeSandbox(i.key)
        )

    message = str(caught.value)
    assert f"scope {scope!r}" in message
    assert "'sandbox'" in message
    for kind in SCOPE_KINDS:
        assert repr(kind) in message
    assert "function" in message


def test_binding_rejects_something_that_is_not_a_token() -> None:
    with pytest.raises(DefinitionError, match="define_capability"):
        create_capability_binding(capability=untyped("sandbox"), acquire=lambda i: i)


def test_binding_rejects_a_non_callable_acquire() -> None:
    with pytest.raises(DefinitionError, match="needs an acquire callable"):
        create_capability_binding(capability=sandbox, acquire=untyped(FakeSandbox("k")))


@pytest.mark.parametrize("hook", ["dispose", "close"])
def test_binding_rejects_a_non_callable_lifecycle_hook(hook: str) -> None:
    hooks: dict[str, Any] = {hook: "not callable"}

    with pytest.raises(DefinitionError, match=f"{hook}= for capability 'sandbox' must be callable"):
        create_capability_binding(capability=sandbox, acquire=lambda i: FakeSandbox(i.key), **hooks)


def test_binding_repr_names_the_capability_and_scope() -> None:
    builtin = create_capability_binding(
        capability=sandbox, scope="user", acquire=lambda i: FakeSandbox(i.key)
    )
    custom = create_capability_binding(
        capability=sandbox, scope=lambda s: s.thread_id, acquire=lambda i: FakeSandbox(i.key)
    )

    assert repr(builtin) == "CapabilityBinding(capability='sandbox', scope='user')"
    assert repr(custom) == "CapabilityBinding(capability='sandbox', scope='custom')"


# -- create_capability_binding: hooks ---------------------------------------------------------


def test_sync_acquire_returns_the_facade_for_the_key_directly() -> None:
    seen: list[AcquireInput] = []

    def acquire(input: AcquireInput) -> FakeSandbox:
        seen.append(input)
        return FakeSandbox(input.key)

    binding = create_capability_binding(capability=sandbox, acquire=acquire)
    given = acquire_input("k-1")

    facade = binding.acquire(given)

    assert isinstance(facade, FakeSandbox)
    assert facade.key == "k-1"
    assert seen == [given]


@pytest.mark.anyio
async def test_async_acquire_returns_an_awaitable_of_the_facade() -> None:
    async def acquire(input: AcquireInput) -> FakeSandbox:
        return FakeSandbox(input.key)

    binding = create_capability_binding(capability=sandbox, acquire=acquire)

    pending = binding.acquire(acquire_input("k-2"))

    assert inspect.isawaitable(pending)
    facade = await pending
    assert isinstance(facade, FakeSandbox)
    assert facade.key == "k-2"


@pytest.mark.anyio
async def test_sync_dispose_hook_receives_the_dispose_input() -> None:
    seen: list[DisposeInput] = []
    binding = create_capability_binding(
        capability=sandbox, acquire=lambda i: FakeSandbox(i.key), dispose=seen.append
    )
    given = dispose_input("k-3")

    await binding.dispose(given)

    assert seen == [given]


@pytest.mark.anyio
async def test_async_dispose_hook_is_awaited() -> None:
    seen: list[DisposeInput] = []

    async def dispose(input: DisposeInput) -> None:
        seen.append(input)

    binding = create_capability_binding(
        capability=sandbox, acquire=lambda i: FakeSandbox(i.key), dispose=dispose
    )
    given = dispose_input("k-4")

    await binding.dispose(given)

    assert seen == [given]


@pytest.mark.anyio
async def test_sync_close_hook_runs() -> None:
    calls: list[str] = []
    binding = create_capability_binding(
        capability=sandbox,
        acquire=lambda i: FakeSandbox(i.key),
        close=lambda: calls.append("close"),
    )

    await binding.close()

    assert calls == ["close"]


@pytest.mark.anyio
async def test_async_close_hook_is_awaited() -> None:
    calls: list[str] = []

    async def close() -> None:
        calls.append("close")

    binding = create_capability_binding(
        capability=sandbox, acquire=lambda i: FakeSandbox(i.key), close=close
    )

    await binding.close()

    assert calls == ["close"]


@pytest.mark.anyio
async def test_hook_errors_propagate_to_the_caller() -> None:
    # The runtime decides what a failed dispose means (on_runtime_error); the binding must not hide it.
    async def dispose(input: DisposeInput) -> None:
        raise OSError(f"cannot destroy {input.key}")

    binding = create_capability_binding(
        capability=sandbox, acquire=lambda i: FakeSandbox(i.key), dispose=dispose
    )

    with pytest.raises(OSError, match="cannot destroy k-5"):
        await binding.dispose(dispose_input("k-5"))


@pytest.mark.anyio
async def test_absent_dispose_and_close_are_no_ops() -> None:
    binding = create_capability_binding(capability=sandbox, acquire=lambda i: FakeSandbox(i.key))

    assert await binding.dispose(dispose_input()) is None
    assert await binding.close() is None


def test_has_dispose_is_false_without_a_dispose_hook() -> None:
    binding = create_capability_binding(
        capability=sandbox, acquire=lambda i: FakeSandbox(i.key), close=lambda: None
    )

    assert binding.has_dispose is False


def test_has_dispose_is_true_with_a_dispose_hook() -> None:
    binding = create_capability_binding(
        capability=sandbox, acquire=lambda i: FakeSandbox(i.key), dispose=lambda i: None
    )

    assert binding.has_dispose is True
