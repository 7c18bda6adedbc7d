"""Helpers the E2B tests share (on pytest's pythonpath): the emulator's connection options,
providers and facades on it, its sandboxes by key, and this host's processes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

from e2b import ApiParams

from pai.sandbox import Sandbox, SeedFile, create_sandbox, create_sandbox_session_manager
from pai.sandbox_e2b import E2BSandboxProvider, key_hash
from pai.sandbox_e2b.testing import E2BEmulator, EmulatedSandbox


def options(emulator: E2BEmulator) -> ApiParams:
    """The SDK's connection options for ``emulator``."""
    return {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}


def provider_for(emulator: E2BEmulator, namespace: str, **settings: object) -> E2BSandboxProvider:
    """A provider on ``emulator`` in ``namespace``, with the other ``settings`` given."""
    return E2BSandboxProvider(
        api_key=emulator.api_key,
        api_url=emulator.url,
        sandbox_url=emulator.url,
        namespace=namespace,
        **settings,  # type: ignore[arg-type]
    )


def sandbox_on(provider: E2BSandboxProvider, key: str, *seed: SeedFile) -> Sandbox:
    """The facade over ``key``'s sandbox, re-created with ``seed`` when it is gone."""
    return create_sandbox(create_sandbox_session_manager(provider=provider, seed=seed).handle(key))


def sandbox_ids(emulator: E2BEmulator, namespace: str, key: str) -> list[str]:
    """The ids of the emulator's sandboxes for ``key`` in ``namespace``."""
    found = emulator.find(**{"pai.namespace": namespace, "pai.key-sha256": key_hash(key)})
    return [sandbox.sandbox_id for sandbox in found]


def sandbox_of(emulator: E2BEmulator, namespace: str, key: str) -> EmulatedSandbox:
    """The one sandbox the emulator holds for ``key`` in ``namespace``."""
    (found,) = emulator.find(**{"pai.namespace": namespace, "pai.key-sha256": key_hash(key)})
    return found


def unique_sleep() -> str:
    """A sleep duration no other process on this host uses: its processes can be told apart."""
    return f"9{secrets.randbelow(10**8):08d}"


def _host_processes() -> Iterator[tuple[int, str, bytes]]:
    """(pid, command line, state) of this host's processes."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        yield int(entry.name), line, state


def host_processes(fragment: str) -> list[str]:
    """``pid: command line`` of this host's processes whose command line contains
    ``fragment`` (zombies included)."""
    return [f"{pid}: {line}" for pid, line, _ in _host_processes() if fragment in line]


def host_pids(fragment: str) -> list[int]:
    """PIDs of this host's live processes (not zombies) whose command line contains
    ``fragment``."""
    return [
        pid
        for pid, line, state in _host_processes()
        if fragment in line and state not in (b"Z", b"X")
    ]
