"""Helpers of the pai-http tests: a real uvicorn server on 127.0.0.1 (streams are tested over a socket: httpx's ASGI transport
buffers them), serving a create_pai app with a scripted streaming model and a tool.

The model: a user message "slow ..." streams its answer slowly (for disconnects); "fail ..."
fails the model call; anything else calls the tool ``runScript`` once, then answers
"ran it: <the tool's output>" in two pieces.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import uvicorn
from pydantic import BaseModel

from pai.core import (
    InMemoryStorage,
    ModelRequest,
    ModelResponseError,
    ToolCall,
    ToolContext,
    create_pai,
    define_agent,
    define_command,
    define_tool,
)
from pai.core.ext import (
    ResponseFinished,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from pai.core.testing import FunctionModel
from pai.http import HttpLimits, Unauthenticated, create_asgi_app

# An identity is "scope" or "scope/user": the scope key is its first part, the user key all of it.
TOKENS = {"token-acme": "acme", "token-globex": "globex", "token-acme-bob": "acme/bob"}


class Command(BaseModel):
    command: str


class Note(BaseModel):
    text: str


async def _stream(request: ModelRequest) -> AsyncIterator[Any]:
    last = request.messages[-1]
    said = str(getattr(last, "content", ""))
    if last.role == "user" and said.startswith("fail"):
        raise ModelResponseError("the model server answered 500: upstream overloaded")
    if last.role == "user" and said.startswith("slow"):
        for index in range(200):
            yield TextDelta(f"part {index} ")
            await anyio.sleep(0.05)
        yield ResponseFinished("stop")
        return
    if last.role == "user":
        yield TextDelta("Let me run it.")
        yield ToolCallStarted(0, "call-1", "runScript")
        yield ToolCallArgumentsDelta(0, '{"command":')
        yield ToolCallArgumentsDelta(0, ' "echo hi"}')
        yield ToolCallFinished(
            0, ToolCall(id="call-1", name="runScript", arguments={"command": "echo hi"})
        )
        yield ResponseFinished("tool_calls")
        return
    yield TextDelta("ran it: ")
    yield TextDelta(str(getattr(last, "content", "")).strip())
    yield ResponseFinished("stop")


def run_script(ctx: ToolContext[Command]) -> str:
    return f"output of {ctx.input.command!r}: hi"


def note(ctx: Any) -> dict[str, str]:
    return {"noted": ctx.input.text}


def build_app(limits: HttpLimits | None = None, **options: Any) -> Any:
    tool = define_tool(
        id="runScript", description="Run a command.", input_schema=Command, execute=run_script
    )
    agent = define_agent(
        name="coder",
        model=FunctionModel(stream_fn=_stream),
        tools={"runScript": tool},
        commands={
            "note": define_command(input=Note, run=note, description="Note."),
            "secret": define_command(input=Note, run=note, description="Not exposed."),
        },
    )
    other = define_agent(name="helper", model=FunctionModel(stream_fn=_stream))
    pai = create_pai(
        agents={"coder": {"agent": agent}, "helper": {"agent": other}},
        scope_key=lambda identity: identity.split("/")[0],
        user_key=lambda identity: identity,
        storage=options.pop("storage", None) or InMemoryStorage(),
    )

    def authenticate(request: Any) -> str:
        header = request.headers.get("authorization", "")
        scope = TOKENS.get(header.removeprefix("Bearer "))
        if scope is None:
            raise Unauthenticated("send Authorization: Bearer <token>")
        return scope

    return pai, create_asgi_app(
        pai, authenticate=authenticate, limits=limits, commands={"coder": ["note"]}, **options
    )


@dataclass
class Served:
    url: str
    pai: Any


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; its base URL while the block runs."""
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


ACME = {"Authorization": "Bearer token-acme"}
GLOBEX = {"Authorization": "Bearer token-globex"}
ACME_BOB = {"Authorization": "Bearer token-acme-bob"}


AGUI_TOOL_RUN = [
    "RUN_STARTED",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "RUN_FINISHED",
]
"""The AG-UI event types of a run of the test model that calls the tool once."""


def sse(response: httpx.Response) -> Iterator[tuple[int | None, str]]:
    """(id, data) of each event of an SSE response, as they arrive."""
    event_id: int | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            data.append(line[6:])


def agui_body(thread_id: str, text: str, run_id: str = "") -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id or uuid.uuid4().hex,
        "state": None,
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": None,
    }
