"""What the emulator holds: its sandboxes, their processes, the request log, and the rules of
E2B's API about lifetimes (its plan's maximum, its default)."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pai.sandbox_e2b.testing._faults import EmulatorFaults
from pai.sandbox_e2b.testing._machine import Machine, Spawned, prepare_root, remove_tree

State = Literal["running", "paused"]

_REQUEST_LOG_SIZE = 10_000


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class Process:
    """A process envd started (and still tracks) in a sandbox."""

    spawned: Spawned
    cmd: str
    args: list[str]
    envs: dict[str, str]
    cwd: str
    tag: str | None
    stdin_open: bool
    stdin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    output_cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when envd stops waiting for the output pipes to close (a kill, a term, the
    deadline), as its handler does: the stream then ends when the process does."""
    killed_at_deadline: bool = False
    deadline: asyncio.TimerHandle | None = None
    reaper: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.spawned.pid


@dataclass
class Sandbox:
    sandbox_id: str
    template: str
    metadata: dict[str, str]
    env_vars: dict[str, str]
    root: Path
    started_at: datetime
    end_at: datetime
    access_token: str
    allow_internet_access: bool | None
    envd_version: str
    machine: Machine
    state: State = "running"
    processes: dict[int, Process] = field(default_factory=dict[int, Process])
    created_seq: int = 0

    def listed(self) -> dict[str, object]:
        return {
            "templateID": self.template,
            "sandboxID": self.sandbox_id,
            "clientID": "emulator",
            "startedAt": iso(self.started_at),
            "endAt": iso(self.end_at),
            "cpuCount": 2,
            "memoryMB": 512,
            "diskSizeMB": 1024,
            "state": self.state,
            "envdVersion": self.envd_version,
            "metadata": dict(self.metadata),
        }

    def created(self) -> dict[str, object]:
        return {
            "templateID": self.template,
            "sandboxID": self.sandbox_id,
            "clientID": "emulator",
            "envdVersion": self.envd_version,
            "envdAccessToken": self.access_token,
            "trafficAccessToken": None,
            "domain": None,
        }


@dataclass(frozen=True, slots=True)
class EmulatedRequest:
    """One request the emulator received (see :meth:`E2BEmulator.requests`)."""

    method: str
    path: str
    """The URL path: ``/v2/sandboxes``, ``/files``, ``/process.Process/Start``, ..."""
    sandbox_id: str | None
    """The sandbox it was for: the ``E2b-Sandbox-Id`` header (envd) or the id in the path."""
    query: dict[str, list[str]]
    body: dict[str, object] | None
    """The JSON body of a control-plane request (``None`` for envd and bodiless requests)."""


@dataclass(frozen=True, slots=True)
class EmulatedSandbox:
    """What the emulator knows of one sandbox (see :meth:`E2BEmulator.sandboxes`)."""

    sandbox_id: str
    template: str
    metadata: dict[str, str]
    state: State
    end_at: datetime
    root: Path
    """The host folder holding the sandbox's files."""
    allow_internet_access: bool | None


@dataclass(frozen=True, slots=True)
class Settings:
    """What an emulator was made with (see :class:`E2BEmulator`)."""

    api_key: str
    default_timeout: int
    max_timeout: int
    templates: tuple[str, ...]
    envd_version: str


class Emulation:
    """The state the ASGI handlers share; lives on the server's event loop, and is read and
    changed (under :attr:`lock`) from the thread of the tests driving the emulator."""

    def __init__(self, settings: Settings, faults: EmulatorFaults) -> None:
        self.settings = settings
        self.faults = faults
        self.home: Path | None = None  # the folder holding every sandbox's root
        self.sandboxes: dict[str, Sandbox] = {}
        self.deleters: list[threading.Thread] = []
        self.requests: list[EmulatedRequest] = []
        self.not_found: dict[str, int] = {}
        self.lock = threading.Lock()
        self.seq = 0

    @property
    def support(self) -> Path:
        assert self.home is not None
        return self.home / "support"

    # -- requests --

    def record(self, request: EmulatedRequest) -> None:
        with self.lock:
            self.requests.append(request)
            if len(self.requests) > _REQUEST_LOG_SIZE:
                del self.requests[: len(self.requests) - _REQUEST_LOG_SIZE]

    def take_not_found(self, sandbox_id: str) -> bool:
        """Whether this envd request should answer "not found" although the sandbox lives."""
        with self.lock:
            left = self.not_found.get(sandbox_id, 0)
            if left <= 0:
                return False
            if left == 1:
                del self.not_found[sandbox_id]
            else:
                self.not_found[sandbox_id] = left - 1
            return True

    # -- lifecycle --

    def create(
        self,
        template: str,
        timeout: int,
        metadata: Mapping[str, str],
        env_vars: Mapping[str, str],
        allow_internet_access: bool | None,
    ) -> Sandbox:
        root = Path(tempfile.mkdtemp(prefix="sandbox-", dir=self.home))
        prepare_root(root)
        moment = now()
        with self.lock:
            self.seq += 1
            sandbox = Sandbox(
                sandbox_id="i" + uuid.uuid4().hex[:19],
                template=template,
                metadata=dict(metadata),
                env_vars=dict(env_vars),
                root=root,
                started_at=moment,
                end_at=moment + timedelta(seconds=timeout),
                access_token=secrets.token_hex(16),
                allow_internet_access=allow_internet_access,
                envd_version=self.settings.envd_version,
                machine=self._machine(root, allow_internet_access),
                created_seq=self.seq,
            )
            self.sandboxes[sandbox.sandbox_id] = sandbox
        return sandbox

    def _machine(self, root: Path, allow_internet_access: bool | None) -> Machine:
        return Machine(root, self.support, network=allow_internet_access is True)

    def expire_due(self) -> None:
        moment = now()
        with self.lock:
            due = [s for s in self.sandboxes.values() if s.end_at <= moment]
        for sandbox in due:
            self.remove(sandbox.sandbox_id)

    def get(self, sandbox_id: str, *, running: bool) -> Sandbox | None:
        self.expire_due()
        with self.lock:
            sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None or (running and sandbox.state != "running"):
            return None
        return sandbox

    def remove(self, sandbox_id: str) -> bool:
        with self.lock:
            sandbox = self.sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return False
        sandbox.machine.kill()
        deleter = threading.Thread(target=self._delete_root, args=(sandbox,), daemon=True)
        with self.lock:
            self.deleters = [t for t in self.deleters if t.is_alive()]
            self.deleters.append(deleter)
        deleter.start()
        return True

    @staticmethod
    def _delete_root(sandbox: Sandbox) -> None:
        # Asks the kernel, not the event loop (which may have stopped): once the sandbox's
        # PID 1 is gone, so is every process that could write into it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sandbox.machine.running():
            time.sleep(0.02)
        remove_tree(sandbox.root)

    def pause(self, sandbox_id: str) -> bool | None:
        sandbox = self.get(sandbox_id, running=False)
        if sandbox is None:
            return None
        if sandbox.state == "paused":
            return False
        sandbox.state = "paused"
        sandbox.machine.kill()  # its processes end; envd's records of them go as they do
        return True

    def extend(self, sandbox: Sandbox, seconds: float, *, allow_shorter: bool) -> None:
        """E2B's ``KeepAliveFor``: the lifetime becomes ``seconds`` from now, but never past
        the plan's maximum counted from the (last) start, and never shorter unless
        ``allow_shorter``."""
        moment = now()
        limit = sandbox.started_at + timedelta(seconds=self.settings.max_timeout)
        end = min(moment + timedelta(seconds=max(0.0, seconds)), max(moment, limit))
        if allow_shorter or end > sandbox.end_at:
            sandbox.end_at = end

    def resume(self, sandbox: Sandbox, timeout: int) -> None:
        moment = now()
        sandbox.machine = self._machine(sandbox.root, sandbox.allow_internet_access)
        sandbox.state = "running"
        sandbox.started_at = moment
        sandbox.end_at = moment + timedelta(seconds=timeout)

    def kill_everything(self) -> None:
        """Kill every process of every sandbox (their streams then end, so the server can stop
        without waiting for them)."""
        with self.lock:
            held = list(self.sandboxes.values())
        for sandbox in held:
            sandbox.machine.kill()

    def shutdown(self) -> None:
        with self.lock:
            held = list(self.sandboxes.values())
            self.sandboxes.clear()
            deleters = list(self.deleters)
        for sandbox in held:
            sandbox.machine.kill()
            self._delete_root(sandbox)
        for deleter in deleters:
            deleter.join(15)
        if self.home is not None:
            remove_tree(self.home)
            self.home = None
