"""Storage benchmarks. Run:  uv run python benchmarks/bench_storage.py [asyncio|trio ...]

Prints, in one run, for an in-process (``:memory:``) and a file SQLite database (in a temporary
folder):

- single-message appends through ``SqliteStorage.append_messages``, against raw ``sqlite3`` doing
  the same work on a connection set up the same way: serialize the message as the storage does
  (``dump_json``), then the same statements (``BEGIN IMMEDIATE``; the thread's existence and last
  ``seq``; ``INSERT``; ``COMMIT``). Target: <= 2x, on asyncio and on trio.

and for PostgreSQL (``PostgresStorage``, on the server ``PAI_TEST_POSTGRES_URL`` names, in a
schema made for the run and dropped after it; without the variable it prints ``skipped: ...``
with the reason, or fails when ``PAI_REQUIRE_POSTGRES=1``):

- single-message appends and reads of a 10-message thread, against raw ``psycopg`` running the
  same statements on one connection (an append: ``BEGIN``, the transaction id and the thread's
  row lock in one pipelined round trip, then the insert and ``COMMIT`` in another; a read: one
  ``SELECT``), serializing and parsing the messages as the storage does. Target: <= 1.5x, on
  asyncio and on trio (psycopg's async API is asyncio-only, so on trio the raw baseline is its
  synchronous connection called in a worker thread, and the storage runs its calls on a helper
  asyncio loop in a thread: each has one hop between threads per call; on asyncio both run on
  the caller's loop);
- one turn (one model step, through a runtime) on a 1,000-turn thread against a 10-turn one.
  Target: <= 1.5x;
- turns per second with 4 processes x 100 threads each (every process its own runtime and
  storage, its threads' turns concurrent), with the PostgreSQL server's CPU time over the run
  (read from ``/proc`` for the ``postgres`` processes on this machine) as a share of the
  machine's CPU and of all the CPU the run used.

Times are medians over several rounds, with the configurations interleaved so that machine noise
hits them alike. Ratios compare configurations measured in this same run.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from _verdict import verdict

from pai.core import (
    AssistantMessage,
    Message,
    ModelRequest,
    SqliteStorage,
    UserMessage,
    create_agent_runtime,
    define_agent,
    message_adapter,
)
from pai.core.ext import ThreadRecord
from pai.core.testing import text

ROUNDS = 9
APPENDS_PER_ROUND = 1_000
TARGET = 2.0

# The statements SqliteStorage runs for one append (see pai.core._storage_sqlite).
_POSITION = (
    "SELECT EXISTS (SELECT 1 FROM threads WHERE id = ?),"
    " (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?)"
)
_INSERT = "INSERT INTO messages (thread_id, seq, json) VALUES (?, ?, ?)"


async def _raw_connection(path: str, folder: Path) -> sqlite3.Connection:
    """A raw connection set up as SqliteStorage sets up its own, over the schema it creates (a
    storage creates it in a scratch file, copied into an in-process database when ``path`` is
    ``":memory:"``), holding one thread."""
    scratch = folder / "schema.db"
    creator = SqliteStorage(path if path != ":memory:" else scratch)
    await creator.create_thread(ThreadRecord(id="t1", scope_key="bench", agent_name="bench"))
    await creator.aclose()
    connection = sqlite3.connect(path, isolation_level=None)
    if path == ":memory:":
        source = sqlite3.connect(scratch)
        source.backup(connection)
        source.close()
    connection.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    return connection


def _raw_appends(connection: sqlite3.Connection, thread_id: str, n: int) -> float:
    """Seconds per append, raw sqlite3 (SQLite's own automatic checkpoints included)."""
    message = UserMessage(content="list the files in the workspace, please")
    start = time.perf_counter()
    for _ in range(n):
        raw = message_adapter.dump_json(message).decode()
        connection.execute("BEGIN IMMEDIATE")
        exists, last = connection.execute(_POSITION, (thread_id, thread_id)).fetchone()
        if not exists:
            raise LookupError(thread_id)
        connection.executemany(_INSERT, [(thread_id, last + 1, raw)])
        connection.execute("COMMIT")
    return (time.perf_counter() - start) / n


async def _storage_appends(storage: SqliteStorage, thread_id: str, n: int) -> float:
    """Seconds per append through SqliteStorage (its checkpoints included)."""
    batch = [UserMessage(content="list the files in the workspace, please")]
    start = time.perf_counter()
    for _ in range(n):
        await storage.append_messages(thread_id, batch)
    return (time.perf_counter() - start) / n


async def _compare(label: str, storage_path: str, raw_path: str, folder: Path) -> None:
    storage = SqliteStorage(storage_path)
    raw = await _raw_connection(raw_path, folder)
    await storage.create_thread(ThreadRecord(id="t1", scope_key="bench", agent_name="bench"))
    samples: dict[str, list[float]] = {"raw": [], "storage": []}
    try:
        _raw_appends(raw, "t1", 100)  # warm both up
        await _storage_appends(storage, "t1", 100)
        for _ in range(ROUNDS):
            samples["raw"].append(_raw_appends(raw, "t1", APPENDS_PER_ROUND))
            samples["storage"].append(await _storage_appends(storage, "t1", APPENDS_PER_ROUND))
        stored = len(await storage.get_messages("t1"))
        (raw_stored,) = raw.execute("SELECT COUNT(*) FROM messages").fetchone()
        assert stored == raw_stored, f"the storage holds {stored} messages, raw {raw_stored}"
    finally:
        raw.close()
        await storage.aclose()
    base = statistics.median(samples["raw"])
    ours = statistics.median(samples["storage"])
    ratio = ours / base
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(
        f"  {label:<22} raw sqlite3 {base * 1e6:7.2f} us/append   SqliteStorage "
        f"{ours * 1e6:7.2f} us/append   {ratio:5.2f}x (target <= {TARGET}x: {verdict})"
    )


async def bench_sqlite_appends(backend: str) -> None:
    """SqliteStorage appends against raw sqlite3 doing the same statements (target <= 2x)."""
    print(
        f"SqliteStorage: {APPENDS_PER_ROUND:,} single-message appends per round, median of "
        f"{ROUNDS} rounds ({backend})"
    )
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        await _compare(":memory:", ":memory:", ":memory:", folder)
        await _compare(
            "file (WAL, NORMAL)", str(folder / "storage.db"), str(folder / "raw.db"), folder
        )


# -- PostgreSQL -----------------------------------------------------------------------------------

PG_TARGET = 1.5
PG_OPS_PER_ROUND = 300
PROCESSES = 4
THREADS_PER_PROCESS = 100
TURNS_PER_THREAD = 3


def _postgres_url() -> str | None:
    """The server's URL, or ``None`` after printing why the PostgreSQL benchmarks are skipped
    (exiting with status 1 instead when ``PAI_REQUIRE_POSTGRES=1``)."""
    url = os.environ.get("PAI_TEST_POSTGRES_URL", "")
    reason = ""
    if not url:
        reason = (
            "PAI_TEST_POSTGRES_URL is not set (run under scripts/with-postgres.sh, or point it at "
            "a server)"
        )
    else:
        try:
            import psycopg

            psycopg.connect(url, connect_timeout=5).close()
        except Exception as error:  # the driver is missing, or the server does not answer
            from pai.storage_postgres import mask_url

            reason = (
                f"the server at {mask_url(url)} does not answer: {' '.join(str(error).split())}"
            )
    if not reason:
        return url
    if os.environ.get("PAI_REQUIRE_POSTGRES") == "1":
        print(f"bench_storage: PostgreSQL: FAILED: {reason} (and PAI_REQUIRE_POSTGRES=1)")
        sys.exit(1)
    print(f"bench_storage: PostgreSQL: skipped: {reason}")
    return None


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


class _RawPostgres:
    """The statements PostgresStorage runs for an append and a read, on one raw psycopg
    connection (see pai.storage_postgres._storage)."""

    def __init__(self, schema: str) -> None:
        quoted = f'"{schema}"'
        self.position = (
            f"SELECT message_count FROM {quoted}.threads WHERE id = %s FOR NO KEY UPDATE"
        ).encode()
        self.insert = (
            f"WITH stored AS (INSERT INTO {quoted}.messages (thread_id, position, body)"
            " SELECT %s, %s + batch.ord - 1, batch.body"
            " FROM unnest(%s::bytea[]) WITH ORDINALITY AS batch (body, ord))"
            f" UPDATE {quoted}.threads SET message_count = %s WHERE id = %s"
        ).encode()
        self.read = (
            f"SELECT body FROM {quoted}.messages"
            " WHERE thread_id = %s AND position >= %s ORDER BY position"
        ).encode()

    async def append(self, conn: Any, key: bytes, message: Message) -> None:
        body = message_adapter.dump_json(message)
        async with conn.pipeline() as pipeline:
            await conn.execute(b"BEGIN")
            xid = await conn.execute(b"SELECT pg_current_xact_id()::text")
            cursor = await conn.execute(self.position, (key,))
            (count,) = await cursor.fetchone()
            await xid.fetchone()
            await conn.execute(self.insert, (key, count, [body], count + 1, key))
            await conn.execute(b"COMMIT")
            await pipeline.sync()

    def append_sync(self, conn: Any, key: bytes, message: Message) -> None:
        body = message_adapter.dump_json(message)
        with conn.pipeline() as pipeline:
            conn.execute(b"BEGIN")
            xid = conn.execute(b"SELECT pg_current_xact_id()::text")
            (count,) = conn.execute(self.position, (key,)).fetchone()
            xid.fetchone()
            conn.execute(self.insert, (key, count, [body], count + 1, key))
            conn.execute(b"COMMIT")
            pipeline.sync()

    async def read_all(self, conn: Any, key: bytes) -> list[Message]:
        cursor = conn.cursor(binary=True)
        await cursor.execute(self.read, (key, 0))
        return [message_adapter.validate_json(body) for (body,) in await cursor.fetchall()]

    def read_all_sync(self, conn: Any, key: bytes) -> list[Message]:
        cursor = conn.cursor(binary=True)
        cursor.execute(self.read, (key, 0))
        return [message_adapter.validate_json(body) for (body,) in cursor.fetchall()]


async def _per_op(op: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await op()
    return (time.perf_counter() - start) / n


async def bench_postgres_ops(url: str, backend: str) -> None:
    """PostgresStorage appends and reads against raw psycopg running the same statements."""
    import psycopg

    from pai.storage_postgres import PostgresStorage

    schema = f"pai_bench_{uuid.uuid4().hex[:8]}"
    storage = PostgresStorage(url, schema=schema)
    raw = _RawPostgres(schema)
    message = UserMessage(content="list the files in the workspace, please")
    try:
        for thread_id in ("ours", "raw", "read"):
            await storage.create_thread(
                ThreadRecord(id=thread_id, scope_key="bench", agent_name="bench")
            )
        await storage.append_messages("read", [message] * 10)
        if backend == "asyncio":
            conn: Any = await psycopg.AsyncConnection.connect(url, autocommit=True)

            async def raw_append() -> None:
                await raw.append(conn, b"raw", message)

            async def raw_read() -> None:
                await raw.read_all(conn, b"read")
        else:
            conn = psycopg.connect(url, autocommit=True)

            # psycopg's async API is asyncio-only: on trio, raw psycopg is its synchronous
            # connection in a worker thread (blocking the event loop is not a way to use it).
            async def raw_append() -> None:
                await anyio.to_thread.run_sync(raw.append_sync, conn, b"raw", message)

            async def raw_read() -> None:
                await anyio.to_thread.run_sync(raw.read_all_sync, conn, b"read")

        async def our_append() -> None:
            await storage.append_messages("ours", [message])

        async def our_read() -> None:
            await storage.get_messages("read")

        ops = {
            "append": (raw_append, our_append),
            "read": (raw_read, our_read),
        }
        for pair in ops.values():  # warm up: connections, prepared statements
            for op in pair:
                await _per_op(op, 50)
        samples: dict[tuple[str, int], list[float]] = {}
        for _ in range(ROUNDS):
            for name, pair in ops.items():
                for index, op in enumerate(pair):
                    samples.setdefault((name, index), []).append(
                        await _per_op(op, PG_OPS_PER_ROUND)
                    )
        assert len(await storage.get_messages("raw")) == len(await storage.get_messages("ours"))
        if backend == "asyncio":
            await conn.close()
        else:
            conn.close()
    finally:
        await storage.aclose()
        await anyio.to_thread.run_sync(_drop_schema, url, schema)
    print(
        f"PostgresStorage: {PG_OPS_PER_ROUND} single-message appends and reads of a 10-message "
        f"thread per round, median of {ROUNDS} rounds ({backend})"
    )
    for name in ops:
        base = statistics.median(samples[(name, 0)])
        ours = statistics.median(samples[(name, 1)])
        ratio = ours / base
        print(
            f"  {name:<8} raw psycopg {base * 1e6:8.1f} us   PostgresStorage {ours * 1e6:8.1f} us"
            f"   {ratio:5.2f}x {verdict(ratio, PG_TARGET)}"
        )


class _Answer:
    """Answers at once. (Not FunctionModel: that one keeps every request it was sent.)"""

    async def request(self, request: ModelRequest) -> AssistantMessage:
        return text("done")


async def bench_postgres_turn_cost(url: str, n: int = 200) -> None:
    """One turn on a 1,000-turn thread against one on a 10-turn thread."""
    from pai.storage_postgres import PostgresStorage

    schema = f"pai_bench_{uuid.uuid4().hex[:8]}"
    storage = PostgresStorage(url, schema=schema)
    try:
        runtime = create_agent_runtime(
            agent=define_agent(name="bench", model=_Answer()),
            storage=storage,
            scope_key=lambda _: "acme",
            owns_storage=False,
        )
        ops: dict[int, Callable[[], Awaitable[object]]] = {}
        for turns in (10, 1_000):
            await storage.create_thread(
                ThreadRecord(id=f"t{turns}", scope_key="acme", agent_name="bench")
            )
            batch: list[Message] = []
            for i in range(turns):
                batch.append(UserMessage(content=f"question {i}: what is in the file?"))
                batch.append(AssistantMessage(content=f"answer {i}: a few lines of text about it."))
            for start in range(0, len(batch), 500):
                await storage.append_messages(f"t{turns}", batch[start : start + 500])
            thread = runtime.admin(identity=None).thread(f"t{turns}")
            ops[turns] = lambda thread=thread: thread.send("one more")
            await _per_op(ops[turns], 20)  # warm up: the first turn reads the thread
        samples: dict[int, list[float]] = {turns: [] for turns in ops}
        for _ in range(ROUNDS):
            for turns, op in ops.items():
                samples[turns].append(await _per_op(op, n // ROUNDS + 1))
        await runtime.aclose()
    finally:
        await storage.aclose()
        await anyio.to_thread.run_sync(_drop_schema, url, schema)
    short, long = statistics.median(samples[10]), statistics.median(samples[1_000])
    ratio = long / short
    print(
        "PostgresStorage: one turn (one model step, through a runtime) by thread length (asyncio)"
    )
    print(
        f"  10 turns: {short * 1e6:8.1f} us   1,000 turns: {long * 1e6:8.1f} us   "
        f"ratio: {ratio:5.2f}x {verdict(ratio, PG_TARGET)}"
    )


def _postgres_cpu_seconds() -> float | None:
    """CPU time (user + system) of the ``postgres`` processes on this machine, or ``None`` when
    none is visible."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, found = 0, False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        name_end = stat.rfind(")")
        if stat[stat.find("(") + 1 : name_end] != "postgres":
            continue
        fields = stat[name_end + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        found = True
    return total / ticks if found else None


async def _worker(url: str, schema: str) -> None:
    """One of the processes: a runtime with its own storage driving its own threads."""
    from pai.storage_postgres import PostgresStorage

    storage = PostgresStorage(url, schema=schema)
    async with create_agent_runtime(
        agent=define_agent(name="bench", model=_Answer()),
        storage=storage,
        scope_key=lambda _: "acme",
    ) as runtime:
        admin = runtime.admin(identity=None)
        handles = [await admin.create_thread() for _ in range(THREADS_PER_PROCESS)]
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)  # "go"
        cpu, start = time.process_time(), time.perf_counter()

        async def converse(index: int) -> None:
            for _ in range(TURNS_PER_THREAD):
                await handles[index].send("one more")

        async with anyio.create_task_group() as tg:
            for index in range(THREADS_PER_PROCESS):
                tg.start_soon(converse, index)
        print(f"done {time.perf_counter() - start} {time.process_time() - cpu}", flush=True)
        # Connected until told to stop: the parent reads the server's CPU time while its
        # sessions (whose CPU time goes with them) still exist.
        await anyio.to_thread.run_sync(sys.stdin.readline)  # "stop"


def bench_postgres_processes(url: str) -> None:
    """Turns per second with several processes on one database, and the server's CPU share."""
    schema = f"pai_bench_{uuid.uuid4().hex[:8]}"
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--postgres-worker", url, schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]

    def tell(word: str) -> None:
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(word + "\n")
            worker.stdin.flush()

    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line == "ready\n", f"a worker did not start: {line!r}"
        server_before = _postgres_cpu_seconds()
        start = time.perf_counter()
        tell("go")
        client_cpu = 0.0
        for worker in workers:
            assert worker.stdout is not None
            _, _, cpu = worker.stdout.readline().split()
            client_cpu += float(cpu)
        elapsed = time.perf_counter() - start
        server_after = _postgres_cpu_seconds()
    finally:
        tell("stop")
        for worker in workers:
            worker.wait(timeout=120)
        _drop_schema(url, schema)
    turns = PROCESSES * THREADS_PER_PROCESS * TURNS_PER_THREAD
    cores = os.cpu_count() or 1
    print(
        f"PostgresStorage: {PROCESSES} processes x {THREADS_PER_PROCESS} threads x "
        f"{TURNS_PER_THREAD} turns (one model step each), concurrent"
    )
    print(f"  {turns / elapsed:8.0f} turns/s over {elapsed:.2f} s")
    if server_before is None or server_after is None:
        print("  server CPU: not measured (no postgres process visible in /proc on this machine)")
        return
    server = server_after - server_before
    print(
        f"  server CPU: {server:.2f} s ({server * 1e3 / turns:.2f} ms per turn): "
        f"{server / (elapsed * cores) * 100:4.1f}% of the machine's {cores} cores, "
        f"{server / (server + client_cpu) * 100:4.1f}% of the CPU the run used "
        f"(the {PROCESSES} processes: {client_cpu:.2f} s)"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--postgres-worker"]:
        anyio.run(_worker, sys.argv[2], sys.argv[3])
        sys.exit(0)
    backends = sys.argv[1:] or ["asyncio", "trio"]
    for name in backends:
        anyio.run(bench_sqlite_appends, name, backend=name)
    postgres = _postgres_url()
    if postgres is not None:
        for name in backends:
            anyio.run(bench_postgres_ops, postgres, name, backend=name)
        anyio.run(bench_postgres_turn_cost, postgres)
        bench_postgres_processes(postgres)
