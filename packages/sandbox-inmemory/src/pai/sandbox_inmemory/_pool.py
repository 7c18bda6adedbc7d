"""The provider's worker processes: started lazily, reused, killed and replaced.

A worker (the ``_worker`` package, started as ``python -I -c <bootstrap>`` that imports
``pai.sandbox_inmemory._worker`` and calls its ``main``) runs one command at a time and keeps
nothing between commands, so one pool serves every instance of a provider. This module is the
only one in the provider's process that starts, talks to or kills worker processes. The host talks to a worker only through non-blocking
pipes and ``anyio.wait_readable`` / ``wait_writable``, so waiting never blocks the host's event
loop, works the same on asyncio and trio, and a worker may serve callers on several event loops
(one after the other). Processes are plain :class:`subprocess.Popen` objects for that reason:
anyio's process objects belong to the event loop that started them.

At most ``max_workers`` commands run at once per event loop; more wait for a free worker. When a
worker is taken and no other is idle, a spare is started at once, so that a replaced worker
(killed at a timeout) does not make the next command wait for a process to start. A worker back
from a command is kept while fewer than ``max_workers + 1`` are idle (one for each command that
may run next, and the spare), so commands on one event loop reuse the same ``max_workers + 1``
processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable

import anyio
import anyio.to_thread

from pai.sandbox import SandboxProviderError
from pai.sandbox_inmemory._isolation import Isolation, isolation_from_report, log_isolation
from pai.sandbox_inmemory._protocol import (
    HEADER,
    MAX_JSON,
    WORKER_ENVIRONMENT,
    ProtocolError,
    decode_body,
    encode_frame,
)

__all__ = ["STARTUP_TIMEOUT", "Lease", "Worker", "WorkerDied", "WorkerPool"]

# The worker imports only this package's worker modules (not its __init__, which pulls in
# pai-sandbox and pai-core): the package is registered by hand from its folder.
_BOOTSTRAP = (
    "import sys, json, types; sys.path[:0] = json.loads(sys.argv.pop(1)); "
    "package = types.ModuleType('pai.sandbox_inmemory'); "
    "package.__path__ = [sys.argv.pop(1)]; "
    "sys.modules['pai.sandbox_inmemory'] = package; "
    "from pai.sandbox_inmemory._worker import main; main()"
)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


_SMALL_WRITE = 64 * 1024
"""Payloads up to this size are written in one piece with their frame's head."""

_SMALL = 1 << 20
"""Frames parts up to this size are read through the shared buffer; larger ones directly."""

STARTUP_TIMEOUT = 60.0
"""Seconds a new worker process may take to import its interpreter and say it is ready."""


class WorkerDied(Exception):
    """The worker's pipe closed: it was killed, ran out of memory or crashed."""


class Worker:
    """One worker process and the host's end of its pipes."""

    __slots__ = ("_buffer", "_reader", "_writer", "facts", "killed", "process", "ready")

    def __init__(self, memory_budget: int) -> None:
        self.process: subprocess.Popen[bytes] = subprocess.Popen(  # our own interpreter
            [
                sys.executable,
                "-I",
                "-c",
                _BOOTSTRAP,
                json.dumps(sys.path),
                _PACKAGE_DIR,
                str(memory_budget),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(WORKER_ENVIRONMENT),
            cwd="/",
            start_new_session=True,  # the terminal's Ctrl-C is the host's business
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._writer: int = self.process.stdin.fileno()
        self._reader: int = self.process.stdout.fileno()
        os.set_blocking(self._writer, False)
        os.set_blocking(self._reader, False)
        self._buffer: bytearray = bytearray()
        self.ready: bool = False
        self.killed: bool = False
        self.facts: dict[str, object] = {}
        """What the worker reported when ready (its memory limit, its kernel confinement)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(self, frame: bytes, payload: bytes = b"") -> None:
        """Write ``frame`` and then ``payload`` (the rest of the frame): joined when small, so
        the worker wakes once to read it whole; a large payload is not copied."""
        parts = (frame + payload,) if len(payload) <= _SMALL_WRITE else (frame, payload)
        for part in parts:
            view = memoryview(part)
            while view:
                try:
                    written = os.write(self._writer, view)
                except BlockingIOError:
                    await anyio.wait_writable(self._writer)
                    continue
                except (BrokenPipeError, OSError) as error:
                    raise WorkerDied(str(error)) from None
                view = view[written:]

    async def _fill(self, size: int) -> None:
        while len(self._buffer) < size:
            try:
                chunk = os.read(self._reader, max(size - len(self._buffer), 1 << 16))
            except BlockingIOError:
                await anyio.wait_readable(self._reader)
                continue
            except OSError as error:
                raise WorkerDied(str(error)) from None
            if not chunk:
                raise WorkerDied("the worker closed its pipe")
            self._buffer += chunk

    async def _take(self, size: int) -> bytes:
        if size <= _SMALL:
            await self._fill(size)
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data
        # A large payload is read straight into its own buffer: the host holds it once (plus
        # the final copy into bytes), never several slices of it.
        out = bytearray(size)
        view = memoryview(out)
        filled = min(len(self._buffer), size)
        view[:filled] = self._buffer[:filled]
        del self._buffer[:filled]
        while filled < size:
            try:
                count = os.readv(self._reader, [view[filled:]])
            except BlockingIOError:
                await anyio.wait_readable(self._reader)
                continue
            except OSError as error:
                raise WorkerDied(str(error)) from None
            if not count:
                raise WorkerDied("the worker closed its pipe")
            filled += count
        view.release()
        return bytes(out)

    async def _skip(self, size: int) -> None:
        """Read and drop ``size`` bytes, holding at most a small chunk of them."""
        remaining = size
        while remaining:
            chunk = min(remaining, _SMALL)
            await self._fill(chunk)
            del self._buffer[:chunk]
            remaining -= chunk

    async def receive(
        self, max_payload: int | Callable[[list[object]], int]
    ) -> tuple[list[object], bytes | None]:
        """The next frame. A payload over ``max_payload`` (a number, or a function of the
        frame's JSON part) is read and dropped, never held: the frame comes back with ``None``
        for it. A JSON part over its limit is a protocol error."""
        body_size, payload_size = HEADER.unpack(await self._take(HEADER.size))
        if body_size > MAX_JSON:
            raise ProtocolError(f"a worker sent a message of {body_size} bytes, over the limit")
        body = decode_body(await self._take(body_size))
        limit = max_payload if isinstance(max_payload, int) else max_payload(body)
        if payload_size <= limit:
            return body, await self._take(payload_size)
        await self._skip(payload_size)
        return body, None

    async def probe(self, path: str) -> bool:
        """Whether C code in this (idle, ready) worker, below its audit hook, can open the host
        file at ``path`` (a SQLite ``ATTACH``): ``False`` wherever the kernel confines it."""
        await self.send(encode_frame(["probe", path]))
        message, _ = await self.receive(0)
        if message[0] != "probed" or len(message) != 2 or not isinstance(message[1], bool):
            raise ProtocolError(f"a worker answered a probe with {message[0]!r}")
        return message[1]

    async def wait_ready(self) -> None:
        if self.ready:
            return
        try:
            message, _ = await self.receive(1024)
        except WorkerDied:
            raise SandboxProviderError(
                "the in-memory sandbox's worker process failed to start: " + self._startup_error()
            ) from None
        if message[0] != "ready":
            raise ProtocolError(f"a worker started with {message[0]!r} instead of 'ready'")
        if len(message) > 1 and isinstance(message[1], dict):
            self.facts = message[1]
        self.ready = True
        if self.process.stderr is not None:
            self.process.stderr.close()  # the worker has pointed its stderr at /dev/null

    def _startup_error(self) -> str:
        self.kill()
        stream = self.process.stderr
        if stream is None:
            return "no details"
        with contextlib.suppress(OSError, ValueError):
            os.set_blocking(stream.fileno(), False)
            text = (stream.read(8192) or b"").decode("utf-8", "replace").strip()
            return text.splitlines()[-1] if text else f"exit status {self.process.poll()}"
        return "no details"

    def kill(self) -> None:
        """SIGKILL the worker (thread-safe, idempotent); reap it with :meth:`reap`."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError, OSError):
            os.kill(self.process.pid, signal.SIGKILL)

    async def reap(self) -> None:
        """Kill the worker, wait for it to end and close the host's pipe ends."""
        self.kill()
        with anyio.CancelScope(shield=True):
            if self.process.poll() is None:
                await anyio.to_thread.run_sync(self.process.wait)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class _Slots:
    """At most ``size`` leases at once on one event loop; waiters are served in arrival order.

    Not anyio's ``CapacityLimiter``: a task waiting there holds a raised ``WouldBlock`` (two, with
    this pool's own first try) and their tracebacks and frames for as long as it waits. With a
    thousand commands queued for a few workers, those are thousands of objects the garbage
    collector walks again and again. Here a waiter holds one ``anyio.Event``, and a freed slot
    goes straight to the first waiter.
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: deque[anyio.Event] = deque()

    async def take(self, deadline: float) -> bool:
        """Take a slot; ``False`` if ``deadline`` passed first."""
        if self._free and not self._waiters:
            self._free -= 1
            return True
        handed = anyio.Event()
        self._waiters.append(handed)
        try:
            with anyio.move_on_at(deadline):
                await handed.wait()
        except BaseException:  # cancelled from outside: leave the queue, or pass the slot on
            if handed.is_set():
                self.give()
            else:
                self._waiters.remove(handed)
            raise
        if handed.is_set():  # handed a slot (perhaps just as the deadline passed): keep it
            return True
        self._waiters.remove(handed)
        return False

    def give(self) -> None:
        """Free a slot: the first waiter gets it, else it waits for the next taker."""
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self._free += 1


class Lease:
    """One command's use of a worker (see :meth:`WorkerPool.lease`)."""

    __slots__ = ("_pool", "_slots", "startup", "worker")

    def __init__(self, pool: WorkerPool, worker: Worker, slots: _Slots) -> None:
        self._pool = pool
        self.worker = worker
        self._slots = slots
        self.startup = 0.0
        """Seconds spent waiting for a new worker process to start."""

    async def release(self, *, reusable: bool) -> None:
        """Give the worker back (or kill it, when not ``reusable``) and free the slot."""
        try:
            if not self._pool.keep(self.worker, reusable=reusable):
                with anyio.CancelScope(shield=True):
                    await self.worker.reap()
        finally:
            self._slots.give()


def _loop_key() -> object:
    """The running event loop, as a weak-referenceable key."""
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: anyio's other backend, trio
        import trio

        return trio.lowlevel.current_trio_token()


class WorkerPool:
    """Idle workers shared by every instance of one provider; see the module docstring."""

    def __init__(self, *, max_workers: int, memory_budget: int) -> None:
        self.max_workers = max_workers
        self.memory_budget = memory_budget
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._slots: weakref.WeakKeyDictionary[object, _Slots] = weakref.WeakKeyDictionary()
        self.generation: int = 0  # bumped by close(): commands running then were stopped by it
        self.isolation: Isolation | None = None
        """How the last worker that started is confined, as it reported it."""

    def _loop_slots(self) -> _Slots:
        key = _loop_key()
        with self._lock:
            slots = self._slots.get(key)
            if slots is None:
                slots = self._slots[key] = _Slots(self.max_workers)
            return slots

    def warm(self) -> None:
        """Start one idle worker if none is idle or running (so the first command is quick)."""
        with self._lock:
            if self._idle or self._busy:
                return
            self._idle.append(Worker(self.memory_budget))

    async def lease(self, deadline: float) -> Lease | None:
        """A ready worker for one command, or ``None`` if ``deadline`` passed while every worker
        was busy. Waiting for a free worker counts against the deadline (the command's timeout);
        waiting for a new worker process to start does not (see :attr:`Lease.startup`).
        Give the lease back with :meth:`Lease.release`.
        """
        slots = self._loop_slots()
        if not await slots.take(deadline):
            return None
        try:
            with self._lock:
                worker = self._take_idle() or Worker(self.memory_budget)
                self._busy.add(worker)
                if not self._idle:
                    self._idle.append(Worker(self.memory_budget))  # the warm spare
        except BaseException:
            slots.give()
            raise
        lease = Lease(self, worker, slots)
        if not worker.ready:
            started = anyio.current_time()
            try:
                with anyio.fail_after(STARTUP_TIMEOUT):
                    await worker.wait_ready()
                self._note_isolation(worker)
            except BaseException as error:
                await lease.release(reusable=False)
                if isinstance(error, TimeoutError):
                    raise SandboxProviderError(
                        "the in-memory sandbox's worker process did not start within "
                        f"{STARTUP_TIMEOUT:g} s"
                    ) from None
                raise
            lease.startup = anyio.current_time() - started
        return lease

    def _note_isolation(self, worker: Worker) -> None:
        isolation = isolation_from_report(worker.facts.get("confinement"))
        if isolation != self.isolation:  # logged once, and again only if it changes
            self.isolation = isolation
            log_isolation(isolation)

    def _take_idle(self) -> Worker | None:
        """The idle worker that was used last and is ready (warm), else any idle one."""
        for index in range(len(self._idle) - 1, -1, -1):
            if self._idle[index].ready:
                return self._idle.pop(index)
        return self._idle.pop() if self._idle else None

    def keep(self, worker: Worker, *, reusable: bool) -> bool:
        """Put ``worker`` back among the idle ones; ``False`` when it is not kept (the caller
        reaps it)."""
        with self._lock:
            self._busy.discard(worker)
            # Up to max_workers + 1 idle: a worker for each command that may run next, and the
            # warm spare. With one fewer, a worker back from a command would be killed while the
            # spare that replaced it started another process.
            keep = reusable and not worker.killed and len(self._idle) <= self.max_workers
            if keep:
                self._idle.append(worker)
        return keep

    def pids(self) -> list[int]:
        """The process ids of the live workers that finished starting, idle or busy."""
        with self._lock:
            workers = [*self._idle, *self._busy]
        return [w.pid for w in workers if w.ready and w.process.poll() is None]

    async def close(self) -> None:
        """Kill every worker, idle or running; a later command starts new ones."""
        self.generation += 1
        with self._lock:
            workers = [*self._idle, *self._busy]
            self._idle.clear()
        for worker in workers:
            worker.kill()
        with anyio.CancelScope(shield=True):
            for worker in workers:
                if worker.process.poll() is None:
                    await anyio.to_thread.run_sync(worker.process.wait)
                if worker not in self._busy:
                    await worker.reap()

    def __del__(self) -> None:
        for worker in [*self._idle, *self._busy]:
            worker.kill()
