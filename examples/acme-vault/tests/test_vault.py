"""The facade and its client: lazy, single-flight, reconnect and retry, close versus dispose."""

from __future__ import annotations

import anyio
import pytest

from acme_vault import (
    SecretNotFoundError,
    VaultClient,
    VaultClosedError,
    VaultServer,
    VaultUnavailableError,
    memory_server,
)
from acme_vault._server import parse_url, server_for_url

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> VaultServer:
    return memory_server()


async def test_facades_are_lazy(server: VaultServer) -> None:
    client = VaultClient(server.url)
    facade = client.vault("alice")
    assert facade.key == "alice"
    assert (server.opened, server.vault_ids()) == (0, {})
    assert await facade.names() == []
    assert server.opened == 1
    assert list(server.vault_ids()) == ["alice"]
    await client.aclose()


async def test_put_get_names(server: VaultServer) -> None:
    async with VaultClient(server.url) as client:
        facade = client.vault("alice")
        await facade.put("b", "2")
        await facade.put("a", "1")
        await facade.put("a", "one")
        assert await facade.names() == ["a", "b"]
        assert await facade.get("a") == "one"
        with pytest.raises(SecretNotFoundError, match=r"'c'.*secrets are: 'a', 'b'"):
            await facade.get("c")
        # Vaults are separate per key.
        assert await client.vault("bob").names() == []


async def test_concurrent_first_uses_open_one_connection(server: VaultServer) -> None:
    async with VaultClient(server.url) as client:
        ids: list[str] = []

        async def use() -> None:
            ids.append(await client.vault("alice").vault_id())

        async with anyio.create_task_group() as tg:
            for _ in range(25):
                tg.start_soon(use)
        assert len(set(ids)) == 1
        assert (server.opened, server.open_connections) == (1, 1)


async def test_reconnects_after_the_service_drops_connections(server: VaultServer) -> None:
    async with VaultClient(server.url, retry_delay=0) as client:
        facade = client.vault("alice")
        await facade.put("a", "1")
        server.drop_connections()
        assert await facade.get("a") == "1"
        assert (server.opened, server.closed, server.open_connections) == (2, 1, 1)


async def test_gives_up_after_its_retries_when_the_service_is_down(server: VaultServer) -> None:
    async with VaultClient(server.url, retries=2, retry_delay=0) as client:
        facade = client.vault("alice")
        await facade.put("a", "1")
        server.drop_connections()
        server.reachable = False
        with pytest.raises(VaultUnavailableError, match=r"after 3 attempt\(s\).*not reachable"):
            await facade.get("a")
        server.reachable = True  # back up: the same facade works again
        assert await facade.get("a") == "1"


async def test_close_keeps_vaults_and_dispose_deletes_one(server: VaultServer) -> None:
    client = VaultClient(server.url)
    await client.vault("alice").put("a", "1")
    await client.vault("bob").put("b", "2")
    await client.dispose("bob")
    await client.dispose("never-used")  # harmless
    assert list(server.vault_ids()) == ["alice"]
    await client.aclose()
    assert server.open_connections == 0
    assert server.secrets("alice") == {"a": "1"}
    with pytest.raises(VaultClosedError, match="closed"):
        await client.vault("alice").get("a")
    # Another client (a new process, say) finds the vault where it was.
    async with VaultClient(server.url) as again:
        assert await again.vault("alice").get("a") == "1"


def test_urls() -> None:
    assert parse_url("memory://") == ""
    assert parse_url("memory://team") == "team"
    assert server_for_url("memory://team") is memory_server("team")
    with pytest.raises(ValueError, match=r"unsupported vault URL 'https://vault\.acme\.io'"):
        parse_url("https://vault.acme.io")
