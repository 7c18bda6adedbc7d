"""Seed path rules, ``sandbox_capability`` / ``create_sandbox_service``, and the runtime wiring."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeProvider, Reply
from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    CapabilityBinding,
    CapabilityBindingError,
    CapabilityScope,
    CapabilityScopeInput,
    ScopeKind,
    ToolContext,
    ToolResultMessage,
    define_agent,
    define_tool,
    instance_key,
)
from pai.core.testing import ScriptedModel, create_test_runtime, text, tool_call
from pai.sandbox import (
    Sandbox,
    SandboxClosedError,
    SandboxInputError,
    SandboxPathError,
    SeedFile,
    SeedPathError,
    check_seed,
    create_sandbox_service,
    sandbox,
    sandbox_capability,
)

# -- seed paths ----------------------------------------------------------------------------------

BAD_SEEDS: list[tuple[str, list[SeedFile], str, str]] = [
    # (id, seed, path the error names, fragment of the fix it suggests)
    ("relative", [SeedFile("README.md", "x")], "README.md", "/workspace/README.md"),
    ("dot-relative", [SeedFile("./a.txt", "x")], "./a.txt", "/workspace/"),
    ("empty", [SeedFile("", "x")], "''", "non-empty string"),
    ("nul", [SeedFile("/workspace/a\x00b", "x")], "a\\x00b", "without NUL"),
    ("content-type", [SeedFile("/workspace/n.txt", 123)], "/workspace/n.txt", "bytes or str"),  # type: ignore[arg-type]
    ("outside", [SeedFile("/etc/passwd", "x")], "/etc/passwd", "must go inside"),
    ("root", [SeedFile("/", "x")], "'/'", "must go inside"),
    ("prefix-lookalike", [SeedFile("/workspacefoo/a", "x")], "/workspacefoo/a", "must go inside"),
    ("workspace-itself", [SeedFile("/workspace", "x")], "'/workspace'", "file path inside it"),
    ("workspace-slash", [SeedFile("/workspace/", "x")], "'/workspace/'", "file path inside it"),
    ("reserved", [SeedFile("/workspace/.pai/state", "x")], "/workspace/.pai/state", "choose"),
    ("reserved-itself", [SeedFile("/workspace/.pai", "x")], "/workspace/.pai", "choose"),
    (
        "reserved-via-dots",
        [SeedFile("/workspace/x/../.pai/y", "x")],
        "/workspace/x/../.pai/y",
        "choose",
    ),
    ("dotdot-escape", [SeedFile("/workspace/../etc/x", "x")], "/workspace/../etc/x", "inside"),
    ("deep-escape", [SeedFile("/workspace/a/../../x", "x")], "/workspace/a/../../x", "inside"),
    (
        "duplicate",
        [SeedFile("/workspace/a.txt", "1"), SeedFile("/workspace/./a.txt", "2")],
        "/workspace/a.txt",
        "keep one",
    ),
    (
        "duplicate-after-valid",
        [
            SeedFile("/workspace/ok", "1"),
            SeedFile("/workspace/b", "2"),
            SeedFile("//workspace/b", "3"),
        ],
        "/workspace/b",
        "keep one",
    ),
]


@pytest.mark.parametrize(
    ("seed", "named", "fix"),
    [case[1:] for case in BAD_SEEDS],
    ids=[case[0] for case in BAD_SEEDS],
)
def test_bad_seed_paths_are_refused_at_construction_with_the_provider_untouched(
    provider: FakeProvider, seed: list[SeedFile], named: str, fix: str
) -> None:
    with pytest.raises(SeedPathError) as refused:
        sandbox_capability(provider=provider, seed=seed)
    message = str(refused.value)
    assert named in message
    assert fix in message
    assert isinstance(refused.value, SandboxPathError)
    assert isinstance(refused.value, ValueError)
    assert provider.log == []
    assert provider.aclose_calls == 0


def test_seed_entries_must_be_seed_files(provider: FakeProvider) -> None:
    with pytest.raises(SeedPathError, match="SeedFile"):
        sandbox_capability(provider=provider, seed=[("/workspace/a", "x")])  # type: ignore[list-item]
    assert provider.log == []


def test_a_seed_path_with_a_nul_byte_is_refused_before_any_io(
    provider: FakeProvider,
) -> None:
    with pytest.raises(SandboxPathError, match="NUL"):
        sandbox_capability(provider=provider, seed=[SeedFile("/workspace/a\x00b", "x")])
    assert provider.log == []


def test_create_sandbox_service_checks_seeds_too(provider: FakeProvider) -> None:
    with pytest.raises(SeedPathError):
        create_sandbox_service(provider=provider, seed=[SeedFile("/tmp/x", "x")])
    assert provider.log == []


def test_valid_seed_paths_come_back_normalized() -> None:
    checked = check_seed(
        [
            SeedFile("/workspace/src/../README.md", "# hi", executable=False),
            SeedFile("//workspace//bin/run.sh", b"#!/bin/sh\n", executable=True),
            SeedFile("/workspace/.pai/../notes.md", "n"),
            SeedFile("/workspace/.paix", "not reserved"),
        ]
    )
    assert checked == (
        SeedFile("/workspace/README.md", "# hi", False),
        SeedFile("/workspace/bin/run.sh", b"#!/bin/sh\n", True),
        SeedFile("/workspace/notes.md", "n"),
        SeedFile("/workspace/.paix", "not reserved"),
    )


def test_the_service_keeps_the_normalized_seed(provider: FakeProvider) -> None:
    service = create_sandbox_service(provider=provider, seed=[SeedFile("/workspace/a/../b", "x")])
    assert service.sessions.seed == (SeedFile("/workspace/b", "x"),)
    assert provider.log == []


# -- the binding ---------------------------------------------------------------------------------


def test_sandbox_capability_binds_the_sandbox_token_with_thread_scope_by_default(
    provider: FakeProvider,
) -> None:
    binding = sandbox_capability(provider=provider)
    assert isinstance(binding, CapabilityBinding)
    assert binding.capability is sandbox
    assert binding.scope == "thread"
    assert binding.has_dispose
    assert provider.log == []


@pytest.mark.parametrize("scope", ["thread", "rootThread", "user", "scope", "global"])
def test_sandbox_capability_keeps_the_given_scope(provider: FakeProvider, scope: ScopeKind) -> None:
    assert sandbox_capability(provider=provider, scope=scope).scope == scope


def test_sandbox_capability_keeps_a_custom_scope(provider: FakeProvider) -> None:
    def per_user(s: CapabilityScopeInput) -> str:
        return f"{s.scope_key}/{s.user_key}"

    assert sandbox_capability(provider=provider, scope=per_user).scope is per_user


def test_binding_acquire_is_a_lazy_facade_for_the_key(provider: FakeProvider) -> None:
    binding = sandbox_capability(
        provider=provider, default_timeout=9, output_limit=123, read_limit=456
    )
    facade = binding.acquire(
        AcquireInput("some-key", "sandbox", "thread", "t-1", None, "acme", None, None)
    )
    assert isinstance(facade, Sandbox)
    assert facade.key == "some-key"
    assert (facade.default_timeout, facade.output_limit, facade.read_limit) == (9, 123, 456)
    assert provider.log == []


@pytest.mark.parametrize(
    "not_a_provider", [object(), "docker", None, type("OnlyCreate", (), {"create": None})()]
)
def test_an_object_that_is_not_a_provider_is_refused(not_a_provider: object) -> None:
    for factory in (sandbox_capability, create_sandbox_service):
        with pytest.raises(CapabilityBindingError) as refused:
            factory(provider=not_a_provider)  # type: ignore[arg-type]
        assert refused.value.ids == ("sandbox",)
        assert "SandboxProvider" in str(refused.value)


# -- service keys --------------------------------------------------------------------------------


def test_service_acquire_derives_the_thread_key_the_runtime_derives(
    provider: FakeProvider,
) -> None:
    service = create_sandbox_service(provider=provider)
    facade = service.acquire(scope_key="acme", thread_id="t-1")
    assert facade.key == instance_key("sandbox", "thread", ("acme", "t-1"))
    assert provider.log == []


@pytest.mark.parametrize(
    ("scope", "acquire", "parts"),
    [
        ("thread", {"thread_id": "child", "root_thread_id": "root"}, ("acme", "child")),
        ("rootThread", {"thread_id": "child", "root_thread_id": "root"}, ("acme", "root")),
        ("rootThread", {"thread_id": "top"}, ("acme", "top")),
        ("user", {"thread_id": "t", "user_key": "ann"}, ("acme", "ann")),
        ("scope", {"thread_id": "t", "user_key": "ann"}, ("acme",)),
        ("global", {"thread_id": "t"}, ()),
    ],
    ids=["thread", "rootThread", "rootThread-top-level", "user", "scope", "global"],
)
def test_service_acquire_derives_built_in_scope_keys(
    provider: FakeProvider, scope: ScopeKind, acquire: dict[str, Any], parts: tuple[str, ...]
) -> None:
    service = create_sandbox_service(provider=provider, scope=scope)
    facade = service.acquire(scope_key="acme", **acquire)
    assert facade.key == instance_key("sandbox", scope, parts)
    assert provider.log == []


def test_service_acquire_uses_a_custom_scope_key_verbatim(provider: FakeProvider) -> None:
    seen: list[CapabilityScopeInput] = []

    def custom(s: CapabilityScopeInput) -> str:
        seen.append(s)
        return f"custom:{s.scope_key}:{s.root_thread_id}:{s.user_key}"

    service = create_sandbox_service(provider=provider, scope=custom)
    identity = object()
    facade = service.acquire(
        scope_key="acme", thread_id="t", root_thread_id="r", user_key="ann", identity=identity
    )
    assert facade.key == "custom:acme:r:ann"
    assert seen == [CapabilityScopeInput("t", "r", "acme", "ann", identity)]
    assert service.acquire(scope_key="acme", thread_id="t").key == "custom:acme:t:None"


@pytest.mark.parametrize("user_key", [None, ""])
def test_user_scope_without_a_user_key_is_a_binding_error(
    provider: FakeProvider, user_key: str | None
) -> None:
    service = create_sandbox_service(provider=provider, scope="user")
    with pytest.raises(CapabilityBindingError, match="user_key") as refused:
        service.acquire(scope_key="acme", thread_id="t", user_key=user_key)
    assert refused.value.ids == ("sandbox",)
    assert provider.log == []


def test_service_facades_share_the_service_options(provider: FakeProvider) -> None:
    service = create_sandbox_service(
        provider=provider, default_timeout=None, output_limit=64, read_limit=128
    )
    facade = service.acquire(scope_key="acme", thread_id="t")
    assert (facade.default_timeout, facade.output_limit, facade.read_limit) == (None, 64, 128)


@pytest.mark.parametrize(
    ("option", "value"),
    [("read_limit", 0), ("read_limit", "64MiB"), ("output_limit", -1), ("default_timeout", "5")],
)
def test_bad_limits_are_refused_when_the_binding_is_built_naming_the_option(
    provider: FakeProvider, option: str, value: object
) -> None:
    with pytest.raises(SandboxInputError, match=f"^{option} must be"):
        sandbox_capability(provider=provider, **{option: value})  # pyright: ignore[reportArgumentType]
    with pytest.raises(SandboxInputError, match=f"^{option} must be"):
        create_sandbox_service(provider=provider, **{option: value})  # pyright: ignore[reportArgumentType]
    assert provider.log == []


# -- through a real runtime ----------------------------------------------------------------------


class RunInput(BaseModel):
    command: str


def build_agent(keys_seen: list[str]) -> Any:
    async def execute(ctx: ToolContext[RunInput]) -> str:
        box: Sandbox = ctx.capabilities[sandbox]
        keys_seen.append(box.key)
        return (await box.run_command(ctx.input.command)).stdout

    run_script = define_tool(
        id="runScript",
        description="Run a command in this conversation's sandbox.",
        input_schema=RunInput,
        capabilities={"sandbox": sandbox},
        execute=execute,
    )
    return define_agent(name="coder", tools={"runScript": run_script})


def scripted() -> ScriptedModel:
    return ScriptedModel([tool_call("runScript", {"command": "echo hi"}), text("done")])


def custom_scope(s: CapabilityScopeInput) -> str:
    return f"custom.{s.scope_key}.{s.root_thread_id}"


RUNTIME_SCOPES: list[tuple[str, CapabilityScope, str]] = [
    # (id, scope, the key the runtime must use for thread "t-1" of create_test_runtime's identity)
    ("thread", "thread", instance_key("sandbox", "thread", ("test-scope", "t-1"))),
    ("rootThread", "rootThread", instance_key("sandbox", "rootThread", ("test-scope", "t-1"))),
    ("user", "user", instance_key("sandbox", "user", ("test-scope", "test-user"))),
    ("scope", "scope", instance_key("sandbox", "scope", ("test-scope",))),
    ("global", "global", instance_key("sandbox", "global", ())),
    ("custom", custom_scope, "custom.test-scope.t-1"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("scope", "key"),
    [case[1:] for case in RUNTIME_SCOPES],
    ids=[case[0] for case in RUNTIME_SCOPES],
)
async def test_the_service_reaches_the_instance_a_runtime_tool_used(
    provider: FakeProvider, scope: CapabilityScope, key: str
) -> None:
    service = create_sandbox_service(provider=provider, scope=scope)
    keys_seen: list[str] = []
    model = scripted()
    provider.reply(Reply(stdout=b"hi\n"))
    async with create_test_runtime(
        agent=build_agent(keys_seen), model=model, capabilities={"sandbox": service.binding}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id="t-1")
        assert (await thread.send("go")).text == "done"
        tool_result = model.requests[1].messages[-1]
        assert isinstance(tool_result, ToolResultMessage)
        assert (tool_result.content, tool_result.is_error) == ("hi\n", False)  # the tool ran
        assert keys_seen == [key]
        assert provider.creates == [key]
        used_by_tool = provider.runs[0].instance_id

        facade = service.acquire(scope_key="test-scope", thread_id="t-1", user_key="test-user")
        assert facade.key == key
        await facade.run_command("echo from the pipeline")
        assert provider.runs[-1].instance_id == used_by_tool
        assert provider.creates == [key]

        # A second service over the same backend (another process, say) finds it by key.
        other = create_sandbox_service(provider=provider, scope=scope)
        other_facade = other.acquire(scope_key="test-scope", thread_id="t-1", user_key="test-user")
        await other_facade.run_command("echo from elsewhere")
        assert provider.runs[-1].instance_id == used_by_tool
        assert provider.creates == [key]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("scope", "disposed"),
    [("thread", True), ("rootThread", True), ("user", False), ("scope", False), ("global", False)],
)
async def test_runtime_thread_delete_disposes_the_threads_sandbox(
    provider: FakeProvider, scope: ScopeKind, disposed: bool
) -> None:
    service = create_sandbox_service(provider=provider, scope=scope)
    async with create_test_runtime(
        agent=build_agent([]), model=scripted(), capabilities={"sandbox": service.binding}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id="t-1")
        await thread.send("go")
        (key,) = provider.creates
        await thread.delete()
        assert provider.destroys == ([key] if disposed else [])
        assert (key in provider.live) is not disposed
        assert service.sessions.is_provisioned(key) is not disposed


@pytest.mark.anyio
async def test_runtime_aclose_closes_the_provider_and_destroys_nothing(
    provider: FakeProvider,
) -> None:
    service = create_sandbox_service(provider=provider)
    runtime = create_test_runtime(
        agent=build_agent([]), model=scripted(), capabilities={"sandbox": service.binding}
    )
    thread = await runtime.admin(identity=None).create_thread(thread_id="t-1")
    await thread.send("go")
    (key,) = provider.creates
    await runtime.aclose()
    assert provider.aclose_calls == 1
    assert provider.destroys == []
    assert key in provider.live
    with pytest.raises(SandboxClosedError, match="closed"):
        await service.acquire(scope_key="test-scope", thread_id="t-1").run_command("true")
