"""Real clients this project did not write, from npm: @ag-ui/client's HttpAgent and the ai
package's DefaultChatTransport with readUIMessageStream (what useChat runs), each against a live
server, each reading a run with a tool call.

They need Node.js and npm: the packages are installed with `npm ci` from the committed lock file
(tests/js). Without npm the tests skip, unless PAI_REQUIRE_NODE=1 (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from http_helpers import AGUI_TOOL_RUN, Served

JS = Path(__file__).parent / "js"


@pytest.fixture(scope="session")
def node() -> str:
    found = shutil.which("node")
    npm = shutil.which("npm")
    if found is None or npm is None:
        if os.environ.get("PAI_REQUIRE_NODE") == "1":
            pytest.fail("Node.js and npm are required here (PAI_REQUIRE_NODE=1) but not on PATH")
        pytest.skip("Node.js and npm are not installed: the npm clients cannot run")
    stamp = JS / "node_modules" / ".package-lock.json"
    lock = JS / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return found


def run_client(node: str, script: str, server: Served, thread_id: str, text: str) -> dict[str, Any]:
    done = subprocess.run(
        [node, script, server.url, "coder", thread_id, "token-acme", text],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_ag_ui_http_agent_sees_a_tool_call_run_in_order(node: str, server: Served) -> None:
    seen = run_client(node, "agui-client.mjs", server, "t-js-agui", "run it")
    assert seen["failure"] is None
    assert seen["types"] == AGUI_TOOL_RUN
    assert seen["results"] == [{"toolCallId": "call-1", "content": "output of 'echo hi': hi"}]
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert seen["messages"][1]["toolCalls"] == [
        {"id": "call-1", "name": "runScript", "arguments": '{"command": "echo hi"}'}
    ]
    assert seen["messages"][3]["content"] == "ran it: output of 'echo hi': hi"


def test_the_ai_sdk_reads_a_chat_stream_with_a_tool_call_into_message_parts(
    node: str, server: Served
) -> None:
    seen = run_client(node, "aisdk-client.mjs", server, "t-js-chat", "run it")
    assert seen["errors"] == []
    assert seen["role"] == "assistant"
    assert seen["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Let me run it.", "state": "done"},
        {
            "type": "tool-runScript",
            "toolCallId": "call-1",
            "state": "output-available",
            "input": {"command": "echo hi"},
            "output": "output of 'echo hi': hi",
        },
        {"type": "step-start"},
        {"type": "text", "text": "ran it: output of 'echo hi': hi", "state": "done"},
    ]


def test_the_ai_sdk_surfaces_a_failed_run_as_an_error(node: str, server: Served) -> None:
    done = subprocess.run(
        [node, "aisdk-client.mjs", server.url, "coder", "t-js-fail", "token-acme", "fail now"],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "upstream overloaded" in done.stdout + done.stderr
