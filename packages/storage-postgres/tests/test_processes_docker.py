"""Real runtime processes on one PostgreSQL database, with Docker as the sandbox provider.

Four processes send runs whose tool runs ``hostname`` in the sandbox (a Docker container's
host name is its own). With a ``thread``-scoped binding and one thread, every run of every
process is served by one container; with a ``global``-scoped binding and a thread per process,
every process gets the same one. Each process binds the capability from ``pai.toml`` and finds
the container by its labels, as a deployment's processes would.

Needs a Docker engine with the test image (``PAI_DOCKER_TEST_IMAGE``): skips and says why
without one, fails under ``PAI_REQUIRE_DOCKER=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pai.core import ToolResultMessage
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
REQUIRE_DOCKER = os.environ.get("PAI_REQUIRE_DOCKER") == "1"
RUNS = 5
NAMES = ("north", "south", "east", "west")

WORKER = """
import os
import sys
import time

import anyio
from pydantic import BaseModel

from pai.core import UserMessage, create_agent_runtime, define_agent, define_tool
from pai.core.testing import FunctionModel, text, tool_call
from pai.sandbox import Sandbox, sandbox

name, thread_id, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])


class Command(BaseModel):
    command: str


async def run(ctx):
    box: Sandbox = ctx.capabilities[sandbox]
    result = await box.run_command(ctx.input.command)
    return result.stdout.strip()


def answer(request):
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        return tool_call("run", {"command": "hostname"})
    return text("done")


async def main():
    runtime = create_agent_runtime(
        agent=define_agent(
            name="writer",
            model=FunctionModel(answer),
            tools={
                "run": define_tool(
                    id="run",
                    description="run a command",
                    input_schema=Command,
                    capabilities={"sandbox": sandbox},
                    execute=run,
                )
            },
        ),
        scope_key=lambda identity: "acme",
    )
    async with runtime:
        admin = runtime.admin(identity=None)
        if name == "create":
            print((await admin.create_thread()).id)
            return
        thread = admin.thread(thread_id)
        print("ready", flush=True)
        while not os.path.exists("go"):
            time.sleep(0.001)
        for n in range(runs):
            await thread.send(f"{name} {n}")


anyio.run(main)
"""


@pytest.fixture
def namespace() -> Iterator[str]:
    """A Docker namespace of the test's own; its containers are removed afterwards."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except Exception as error:
        reason = f"no usable Docker engine with image {IMAGE!r}: {error}"
        if REQUIRE_DOCKER:
            pytest.fail(f"PAI_REQUIRE_DOCKER=1 but {reason}")
        pytest.skip(reason)
    name = f"pai-test-pg-{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        for container in containers(client, name):
            container.remove(force=True)
        client.close()


def containers(client: Any, namespace: str) -> list[Any]:
    """The containers of ``namespace`` (the docker SDK is untyped)."""
    found = client.containers.list(all=True, filters={"label": "pai.namespace"})
    return [c for c in found if c.labels.get("pai.namespace") == namespace]


def project(tmp_path: Path, url: str, scope: str, namespace: str) -> Path:
    (tmp_path / "pai.toml").write_text(
        f'[storage]\nurl = "{url}"\nbusy_thread_wait = 300\n\n'
        f'[capabilities.sandbox]\nscope = "{scope}"\nprovider = "docker"\n\n'
        f'[capabilities.sandbox.docker]\nimage = "{IMAGE}"\nnamespace = "{namespace}"\n'
    )
    (tmp_path / "worker.py").write_text(WORKER)
    return tmp_path


def start(folder: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "worker.py", *args],
        cwd=folder,
        env={
            **os.environ,
            "PAI_LOAD_PLUGINS": "pai-storage-postgres,pai-sandbox,pai-sandbox-docker",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen[str]) -> str:
    stdout, stderr = worker.communicate(timeout=600)
    assert worker.returncode == 0, stderr
    return stdout


def host_names(url: str, thread_ids: list[str]) -> list[str]:
    """The ``hostname`` every tool call printed, in the threads' order."""

    async def read() -> list[str]:
        storage = PostgresStorage(url)
        try:
            names: list[str] = []
            for thread_id in thread_ids:
                messages = await storage.get_messages(thread_id)
                names += [m.content for m in messages if isinstance(m, ToolResultMessage)]
            return names
        finally:
            await storage.aclose()

    return anyio.run(read)


def send_from_four_processes(folder: Path, thread_ids: list[str]) -> None:
    workers = [
        start(folder, name, thread_id, str(RUNS))
        for name, thread_id in zip(NAMES, thread_ids, strict=True)
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == "ready\n"
    (folder / "go").touch()
    for worker in workers:
        finish(worker)


@pytest.mark.parametrize("scope", ["thread", "global"])
def test_four_processes_share_one_container(
    tmp_path: Path, postgres_url: str, schemas: TestSchemas, namespace: str, scope: str
) -> None:
    url = f"{postgres_url}?schema={schemas.fresh()}"
    folder = project(tmp_path, url, scope, namespace)
    if scope == "thread":  # every process on one thread
        thread_ids = [finish(start(folder, "create", "-", "0")).strip()] * len(NAMES)
    else:  # a thread each: only the global binding makes them share
        thread_ids = [finish(start(folder, "create", "-", "0")).strip() for _ in NAMES]

    send_from_four_processes(folder, thread_ids)

    names = host_names(url, list(dict.fromkeys(thread_ids)))
    assert len(names) == len(NAMES) * RUNS, names
    assert len(set(names)) == 1, f"the runs were served by several sandboxes: {set(names)}"
    import docker

    client = docker.from_env()
    try:
        found = containers(client, namespace)
        assert len(found) == 1, f"{len(found)} containers in the namespace, not one"
        assert found[0].attrs["Config"]["Hostname"] == names[0]
    finally:
        client.close()
