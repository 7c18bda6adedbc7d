"""Runs over HTTP on a real socket: event order on both protocols (validated against ag-ui's
models), errors, disconnects, resume, busy threads and limits."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent
from http_helpers import ACME, ACME_BOB, AGUI_TOOL_RUN, GLOBEX, Served, agui_body, sse
from pydantic import TypeAdapter

from pai.http import HttpLimits

_EVENT = TypeAdapter(Any)


def chat_body(thread_id: str, text: str) -> dict[str, Any]:
    return {
        "id": thread_id,
        "trigger": "submit-message",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }


def run_stream(
    server: Served, route: str, body: dict[str, Any], headers: dict[str, str] = ACME
) -> Any:
    """A streamed run request to the test app's ``coder`` agent (use it in a ``with``)."""
    return httpx.stream(
        "POST", f"{server.url}/agents/coder/{route}", json=body, headers=headers, timeout=30
    )


def agui_events(
    server: Served, thread_id: str, text: str, headers: dict[str, str] = ACME
) -> list[dict[str, Any]]:
    with run_stream(server, "ag-ui", agui_body(thread_id, text), headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [json.loads(data) for _, data in sse(response)]


def validate_agui(events: list[dict[str, Any]]) -> None:
    from ag_ui.core import Event

    adapter: TypeAdapter[Any] = TypeAdapter(Event)
    for event in events:
        parsed = adapter.validate_python(event)
        assert isinstance(parsed, BaseEvent)


def test_an_agui_run_with_a_tool_call_streams_its_events_in_order(server: Served) -> None:
    events = agui_events(server, "t-agui", "run it")
    validate_agui(events)
    assert [e["type"] for e in events] == AGUI_TOOL_RUN
    assert events[0]["threadId"] == "t-agui"
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"command": "echo hi"}
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call-1"
    assert result["content"] == "output of 'echo hi': hi"
    answer = "".join(e["delta"] for e in events[9:13] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert answer == "ran it: output of 'echo hi': hi"
    # What the client saw is what the thread stored.
    stored = httpx.get(f"{server.url}/threads/t-agui/messages", headers=ACME).json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == result["content"]


def test_a_chat_run_speaks_the_ui_message_stream(server: Served) -> None:
    with run_stream(server, "chat", chat_body("t-chat", "run it")) as response:
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        frames = [data for _, data in sse(response)]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert [c["type"] for c in chunks] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    available = next(c for c in chunks if c["type"] == "tool-input-available")
    assert available["input"] == {"command": "echo hi"}
    assert chunks[-1]["finishReason"] == "stop"


def test_event_ids_count_from_one_and_a_client_resumes_after_the_last_it_saw(
    server: Served,
) -> None:
    with run_stream(server, "chat", chat_body("t-resume", "run it")) as response:
        run_id = response.headers["x-pai-run-id"]
        everything = list(sse(response))
    assert [i for i, _ in everything] == list(range(1, len(everything) + 1))
    with httpx.stream(
        "GET",
        f"{server.url}/threads/t-resume/runs/{run_id}/events",
        headers={**ACME, "Last-Event-ID": "5"},
        timeout=30,
    ) as again:
        assert again.status_code == 200
        rest = list(sse(again))
    assert rest == everything[5:]


def test_a_dropped_client_cancels_the_run_after_the_grace_and_stores_nothing_partial(
    server: Served,
) -> None:
    with run_stream(server, "ag-ui", agui_body("t-drop", "slow please")) as response:
        run_id = response.headers["x-pai-run-id"]
        for _, data in sse(response):
            if json.loads(data)["type"] == "TEXT_MESSAGE_CONTENT":
                break
    deadline = time.monotonic() + 10
    thread: dict[str, Any] = {}
    while time.monotonic() < deadline:
        thread = httpx.get(f"{server.url}/threads/t-drop", headers=ACME).json()
        if thread["live_run_id"] is None:
            break
        time.sleep(0.1)
    assert thread["live_run_id"] is None, "the run went on with nobody reading"
    # As with thread.stream: the step being answered is not stored (nor the user message
    # staged with it); a completed step would have stayed.
    stored = httpx.get(f"{server.url}/threads/t-drop/messages", headers=ACME).json()["messages"]
    assert stored == []
    with httpx.stream(
        "GET",
        f"{server.url}/threads/t-drop/runs/{run_id}/events",
        headers={**ACME, "Last-Event-ID": "0"},
    ) as replay:
        events = [json.loads(d) for _, d in sse(replay)]
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "cancelled"
    assert "disconnected" in events[-1]["message"]
    # The thread takes the next message as usual.
    assert agui_events(server, "t-drop", "run it")[-1]["type"] == "RUN_FINISHED"


def test_a_second_run_on_a_busy_thread_is_refused_naming_the_running_one(server: Served) -> None:
    with run_stream(server, "ag-ui", agui_body("t-busy", "slow please")) as first:
        run_id = first.headers["x-pai-run-id"]
        second = httpx.post(
            f"{server.url}/agents/coder/ag-ui", json=agui_body("t-busy", "run it"), headers=ACME
        )
        assert second.status_code == 409
        assert run_id in second.json()["error"]["message"]
        cancel = httpx.post(f"{server.url}/threads/t-busy/runs/{run_id}/cancel", headers=ACME)
        assert cancel.status_code == 202
        events = [json.loads(d) for _, d in sse(first)]
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["message"] == "the run was cancelled on request"


def test_a_failing_model_ends_the_stream_with_a_clear_error_and_no_traceback(
    server: Served,
) -> None:
    events = agui_events(server, "t-fail", "fail now")
    validate_agui(events)
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    message = events[-1]["message"]
    assert "upstream overloaded" in message
    assert "Traceback" not in message
    assert 'File "' not in message
    with run_stream(server, "chat", chat_body("t-fail2", "fail now")) as response:
        frames = [d for _, d in sse(response)]
    assert frames[-1] == "[DONE]"
    assert json.loads(frames[-2]) == {"type": "error", "errorText": message}


def test_auth_is_refused_with_json_and_scopes_never_see_each_other(server: Served) -> None:
    refused = httpx.post(f"{server.url}/agents/coder/ag-ui", json=agui_body("t-x", "run it"))
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthenticated"
    assert refused.headers["www-authenticate"] == "Bearer"
    agui_events(server, "t-mine", "run it")
    base = f"{server.url}/threads/t-mine"
    for method, url in [
        ("GET", base),
        ("GET", f"{base}/messages"),
        ("DELETE", base),
        ("POST", f"{base}/commands/note"),
        ("GET", f"{base}/runs/x/events"),
        ("POST", f"{base}/runs/x/cancel"),
    ]:
        answer = httpx.request(method, url, headers=GLOBEX, json={"text": "x"})
        assert answer.status_code == 404, (method, url)
        assert answer.json()["error"]["code"] == "thread_not_found"
    # Running in another scope's thread id is the same 404, not a 403.
    taken = httpx.post(
        f"{server.url}/agents/coder/ag-ui", json=agui_body("t-mine", "run it"), headers=GLOBEX
    )
    assert taken.status_code == 404
    assert httpx.get(f"{server.url}/threads", headers=GLOBEX).json() == {"threads": []}
    mine = httpx.get(f"{server.url}/threads", headers=ACME).json()["threads"]
    assert [t["id"] for t in mine] == ["t-mine"]


def test_limits_answer_413_and_429(make_server: Callable[..., Served]) -> None:
    server = make_server(
        HttpLimits(max_body_bytes=2000, max_message_chars=50, max_runs_per_identity=1)
    )
    big = httpx.post(f"{server.url}/agents/coder/ag-ui", content=b"x" * 5000, headers=ACME)
    assert big.status_code == 413
    assert "max_body_bytes" in big.json()["error"]["message"]

    def chunked() -> Iterator[bytes]:
        for _ in range(10):
            yield b"x" * 500

    streamed = httpx.post(f"{server.url}/agents/coder/ag-ui", content=chunked(), headers=ACME)
    assert streamed.status_code == 413
    long = httpx.post(
        f"{server.url}/agents/coder/ag-ui", json=agui_body("t-l", "y" * 51), headers=ACME
    )
    assert long.status_code == 413
    assert "max_message_chars" in long.json()["error"]["message"]
    with run_stream(server, "ag-ui", agui_body("t-a", "slow")) as first:
        assert first.status_code == 200
        second = httpx.post(
            f"{server.url}/agents/coder/ag-ui", json=agui_body("t-b", "run it"), headers=ACME
        )
        assert second.status_code == 429
        assert second.headers["retry-after"] == "1"
        other_scope = httpx.post(
            f"{server.url}/agents/coder/ag-ui", json=agui_body("t-c", "run it"), headers=GLOBEX
        )
        assert other_scope.status_code == 200
        # The limit counts each caller's runs: another user of the same scope has their own.
        same_scope_other_user = httpx.post(
            f"{server.url}/agents/coder/ag-ui", json=agui_body("t-d", "run it"), headers=ACME_BOB
        )
        assert same_scope_other_user.status_code == 200


def test_malformed_bodies_name_the_problem(server: Served) -> None:
    bad = httpx.post(f"{server.url}/agents/coder/ag-ui", json={"threadId": "t"}, headers=ACME)
    assert bad.status_code == 422
    assert "runId" in bad.json()["error"]["message"] or "run_id" in bad.json()["error"]["message"]
    unknown = httpx.post(f"{server.url}/agents/codr/ag-ui", json=agui_body("t", "x"), headers=ACME)
    assert unknown.status_code == 404
    assert "did you mean 'coder'" in unknown.json()["error"]["message"]
    regenerate = {**chat_body("t", "x"), "trigger": "regenerate-message"}
    refused = httpx.post(f"{server.url}/agents/coder/chat", json=regenerate, headers=ACME)
    assert refused.status_code == 422
    bad_id = httpx.post(
        f"{server.url}/agents/coder/ag-ui", json=agui_body("a b", "x"), headers=ACME
    )
    assert bad_id.status_code == 422


def test_commands_run_only_when_exposed(server: Served) -> None:
    agui_events(server, "t-cmd", "run it")
    ran = httpx.post(
        f"{server.url}/threads/t-cmd/commands/note", json={"text": "hello"}, headers=ACME
    )
    assert ran.status_code == 200
    assert ran.json() == {"result": {"noted": "hello"}}
    hidden = httpx.post(
        f"{server.url}/threads/t-cmd/commands/secret", json={"text": "x"}, headers=ACME
    )
    assert hidden.status_code == 404
    invalid = httpx.post(
        f"{server.url}/threads/t-cmd/commands/note", json={"txt": "x"}, headers=ACME
    )
    assert invalid.status_code == 422
    agents = httpx.get(f"{server.url}/agents", headers=ACME).json()["agents"]
    assert agents == [{"id": "coder", "commands": ["note"]}, {"id": "helper", "commands": []}]


def test_delete_completes_when_the_client_disconnects_mid_delete(server: Served) -> None:
    agui_events(server, "t-del", "run it")
    done = threading.Event()

    def delete() -> None:
        with contextlib.suppress(httpx.TimeoutException):
            httpx.delete(f"{server.url}/threads/t-del", headers=ACME, timeout=0.001)
        done.set()

    threading.Thread(target=delete).start()
    assert done.wait(10)
    deadline = time.monotonic() + 10
    status = 200
    while time.monotonic() < deadline:
        status = httpx.get(f"{server.url}/threads/t-del", headers=ACME).status_code
        if status == 404:
            break
        time.sleep(0.05)
    assert status == 404
    assert httpx.delete(f"{server.url}/threads/t-del", headers=ACME).status_code == 404


def test_health_readiness_and_the_openapi_document(server: Served) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["agents"] == ["coder", "helper"]
    document = httpx.get(f"{server.url}/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    from starlette.routing import Route

    from pai.http import create_asgi_app

    app = create_asgi_app(server.pai, authenticate=lambda request: "x")
    served = {
        (route.path, method.lower())
        for route in app.routes
        if isinstance(route, Route)
        for method in (route.methods or ())
        if method != "HEAD"
    }
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert served == documented


def test_an_error_inside_authenticate_is_a_500_without_its_text(
    make_server: Callable[..., Served],
) -> None:
    from http_helpers import build_app, serve

    from pai.http import create_asgi_app

    pai, _ = build_app()

    def broken(request: Any) -> str:
        raise RuntimeError("secret database password in /etc/app.conf")

    with serve(create_asgi_app(pai, authenticate=broken)) as url:
        answer = httpx.get(f"{url}/threads")
    assert answer.status_code == 500
    assert "secret" not in answer.text
    assert "/etc" not in answer.text


@pytest.mark.parametrize("origins", ["https://a.example", ["*"]])
def test_cors_needs_explicit_origins(origins: Any) -> None:
    from http_helpers import build_app

    with pytest.raises(ValueError, match="explicit origins"):
        build_app(cors_origins=origins)


def test_a_file_part_is_refused_without_attachments_and_staged_with_them(
    server: Served, make_server: Callable[..., Served], tmp_path: Any
) -> None:
    import base64

    from pai.http import Attachments, FolderFilesStore, sandbox_stager
    from pai.sandbox import create_sandbox_service
    from pai.sandbox_inmemory import create_in_memory_sandbox_provider

    body = chat_body("t-file", "analyse this CSV")
    data = base64.b64encode(b"a,b\n1,2\n").decode()
    body["messages"][0]["parts"].append(
        {
            "type": "file",
            "mediaType": "text/csv",
            "filename": "../data.csv",
            "url": f"data:text/csv;base64,{data}",
        }
    )
    refused = httpx.post(f"{server.url}/agents/coder/chat", json=body, headers=ACME)
    assert refused.status_code == 415
    service = create_sandbox_service(provider=create_in_memory_sandbox_provider())
    accepting = make_server(
        attachments=Attachments(store=FolderFilesStore(tmp_path), stage=sandbox_stager(service))
    )
    with httpx.stream(
        "POST", f"{accepting.url}/agents/coder/chat", json=body, headers=ACME
    ) as response:
        assert response.status_code == 200
        list(sse(response))
    stored = httpx.get(f"{accepting.url}/threads/t-file/messages", headers=ACME).json()["messages"]
    assert "/workspace/uploads/data.csv (data.csv, text/csv, 8 bytes)" in stored[0]["content"]

    async def staged() -> bytes:
        return await service.acquire(scope_key="acme", thread_id="t-file").read_file(
            "/workspace/uploads/data.csv"
        )

    import anyio

    assert anyio.run(staged) == b"a,b\n1,2\n"
    body["messages"][0]["parts"][1]["url"] = "data:text/csv;base64,***"
    invalid = httpx.post(f"{accepting.url}/agents/coder/chat", json=body, headers=ACME)
    assert invalid.status_code == 422


def test_agui_binary_parts_are_attachments_and_urls_are_refused(
    make_server: Callable[..., Served], tmp_path: Any
) -> None:
    import base64

    from pai.http import Attachments, FolderFilesStore

    server = make_server(attachments=Attachments(store=FolderFilesStore(tmp_path)))
    body = agui_body("t-bin", "")
    data = base64.b64encode(b"%PDF-1.7 tiny").decode()
    body["messages"][0]["content"] = [
        {"type": "text", "text": "summarise this"},
        {
            "type": "document",
            "source": {"type": "data", "value": data, "mimeType": "application/pdf"},
            "metadata": {"filename": "report.pdf"},
        },
    ]
    with httpx.stream(
        "POST", f"{server.url}/agents/coder/ag-ui", json=body, headers=ACME
    ) as response:
        assert response.status_code == 200
        list(sse(response))
    stored = httpx.get(f"{server.url}/threads/t-bin/messages", headers=ACME).json()["messages"]
    assert stored[0]["content"].startswith("summarise this")
    assert "(report.pdf, application/pdf, 13 bytes)" in stored[0]["content"]
    body["messages"][0]["content"][1]["source"] = {
        "type": "url",
        "value": "http://169.254.169.254/",
    }
    refused = httpx.post(f"{server.url}/agents/coder/ag-ui", json=body, headers=ACME)
    assert refused.status_code == 415
    assert "the server fetches nothing" in refused.json()["error"]["message"]
    body["messages"][0]["content"][1]["source"] = {
        "type": "data",
        "value": "@@@",
        "mimeType": "application/pdf",
    }
    invalid = httpx.post(f"{server.url}/agents/coder/ag-ui", json=body, headers=ACME)
    assert invalid.status_code == 422
    assert "content[1].source.value is not valid base64" in invalid.json()["error"]["message"]


def test_a_run_whose_events_pass_max_run_bytes_is_stopped(
    make_server: Callable[..., Served],
) -> None:
    # The slow model streams 200 small pieces: far more than 2,000 bytes of events.
    server = make_server(HttpLimits(max_run_bytes=2000))
    with run_stream(server, "ag-ui", agui_body("t-big", "slow")) as response:
        events = [json.loads(d) for _, d in sse(response)]
    assert events[-1]["type"] == "RUN_ERROR"
    assert "max_run_bytes" in events[-1]["message"]
    assert len(events) < 60
