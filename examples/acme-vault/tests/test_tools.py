"""A tool that uses acme.vault, tested the two ways PAI offers.

- ``run_tool``: the tool alone, with a facade you hand it (a cheap real one: a ``VaultClient`` on
  an in-process server);
- ``create_test_runtime``: the production agent verbatim, a scripted model, and the real binding.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from pai.core import Agent, Message, ToolContext, ToolResultMessage, define_agent, define_tool
from pai.core.testing import ScriptedModel, create_test_runtime, run_tool, text, tool_call
from pydantic import BaseModel

from acme_vault import VaultClient, VaultServer, memory_server, vault, vault_capability

pytestmark = pytest.mark.anyio


# -- the application's tools (what a user of acme-vault writes) --------------------------------


class StoreSecret(BaseModel):
    name: str
    value: str


class ReadSecret(BaseModel):
    name: str


async def store(ctx: ToolContext[StoreSecret]) -> dict[str, list[str]]:
    secrets = ctx.capabilities[vault]  # typed Vault
    await secrets.put(ctx.input.name, ctx.input.value)
    return {"stored": await secrets.names()}


async def read(ctx: ToolContext[ReadSecret]) -> str:
    return await ctx.capabilities.vault.get(ctx.input.name)  # the short spelling


store_secret = define_tool(
    id="storeSecret",
    description="Keep a secret in the user's vault.",
    input_schema=StoreSecret,
    capabilities={"vault": vault},
    execute=store,
)
read_secret = define_tool(
    id="readSecret",
    description="Read a secret from the user's vault.",
    input_schema=ReadSecret,
    capabilities={"vault": vault},
    execute=read,
)


def make_agent(model: ScriptedModel) -> Agent:
    return define_agent(
        name="keeper",
        instructions="Keep the user's secrets.",
        model=model,
        tools={"storeSecret": store_secret, "readSecret": read_secret},
    )


@pytest.fixture
def server() -> VaultServer:
    return memory_server()


@pytest.fixture
async def client(server: VaultServer) -> AsyncIterator[VaultClient]:
    async with VaultClient(server.url, retry_delay=0) as client:
        yield client


# -- run_tool: the tool alone -----------------------------------------------------------------


async def test_run_tool_with_a_real_facade(server: VaultServer, client: VaultClient) -> None:
    ran = await run_tool(
        store_secret,
        input={"name": "api-token", "value": "s3cret"},
        capabilities={"vault": client.vault("alice")},
    )
    assert ran.expect_output() == {"stored": ["api-token"]}
    assert server.secrets("alice") == {"api-token": "s3cret"}

    read_back = await run_tool(
        read_secret, input={"name": "api-token"}, capabilities={"vault": client.vault("alice")}
    )
    assert read_back.expect_output() == "s3cret"


async def test_a_missing_secret_is_a_model_facing_tool_error(client: VaultClient) -> None:
    ran = await run_tool(
        read_secret, input={"name": "nope"}, capabilities={"vault": client.vault("alice")}
    )
    assert ran.is_error
    assert "SecretNotFoundError" in ran.result.content
    assert "Store it first with put()" in ran.result.content


async def test_run_tool_survives_a_dropped_connection(
    server: VaultServer, client: VaultClient
) -> None:
    facade = client.vault("alice")
    await run_tool(store_secret, input={"name": "a", "value": "1"}, capabilities={"vault": facade})
    assert server.drop_connections() == 1  # the service restarts under the tool
    ran = await run_tool(read_secret, input={"name": "a"}, capabilities={"vault": facade})
    assert ran.expect_output() == "1"
    assert (server.opened, server.closed) == (2, 1)


# -- create_test_runtime: the production agent, the real binding --------------------------------


def _tool_results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


async def test_agent_keeps_a_users_secret_across_threads(server: VaultServer) -> None:
    model = ScriptedModel(
        [
            tool_call("storeSecret", {"name": "api-token", "value": "s3cret"}),
            text("Stored."),
            tool_call("readSecret", {"name": "api-token"}),
            text("It is s3cret."),
        ]
    )
    binding = vault_capability(url=server.url, scope="user", retry_delay=0)
    async with create_test_runtime(
        agent=make_agent(model), capabilities={"acme.vault": binding}
    ) as runtime:
        admin = runtime.admin(identity=None)
        first = await admin.create_thread()
        await first.send("Remember my API token: s3cret")
        second = await admin.create_thread()
        result = await second.send("What is my API token?")

        [read_result] = _tool_results(result.messages)
        assert not read_result.is_error, read_result.content
        assert read_result.output == "s3cret"
        assert result.text == "It is s3cret."
        # One vault for the user, shared by both threads, opened lazily once.
        assert len(server.vault_ids()) == 1
        assert server.opened == 1

        await first.delete()  # a user-scoped vault outlives any one thread
        assert len(server.vault_ids()) == 1
    # Shutdown closed the connection and kept the vault.
    assert server.open_connections == 0
    assert list(server.secrets(next(iter(server.vault_ids())))) == ["api-token"]


async def test_thread_scoped_vaults_are_deleted_with_their_thread(server: VaultServer) -> None:
    model = ScriptedModel(
        [tool_call("storeSecret", {"name": "scratch", "value": "x"}), text("Stored.")]
    )
    binding = vault_capability(url=server.url, scope="thread", retry_delay=0)
    async with create_test_runtime(
        agent=make_agent(model), capabilities={"acme.vault": binding}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("Keep this for now")
        assert len(server.vault_ids()) == 1
        await thread.delete()
        assert server.vault_ids() == {}
        assert server.open_connections == 0
