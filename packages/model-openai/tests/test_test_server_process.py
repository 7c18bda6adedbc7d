"""``python -m pai.model_openai.testing``: the test server as a process, driven by a JSON script."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from openai import OpenAI

MODULE = [sys.executable, "-m", "pai.model_openai.testing"]


def _start(script: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [*MODULE, "--script", str(script), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url:
        process.kill()
        _, err = process.communicate(timeout=10)
        pytest.fail(f"the test server printed no URL; stderr:\n{err}")
    return process, url


def test_the_process_serves_the_script_and_records_requests_without_headers(
    tmp_path: Path,
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
                {"text": ["The command ", "printed hi."]},
            ]
        )
    )
    requests = tmp_path / "requests.json"
    process, url = _start(script, "--requests", str(requests))
    try:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/v1")
        client = OpenAI(base_url=url, api_key="sk-secret-test-key", max_retries=0)
        first = client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "run it"}]
        )
        calls = first.choices[0].message.tool_calls or []
        assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
            ("run_command", {"command": "echo hi"})
        ]
        second = client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "and?"}]
        )
        assert second.choices[0].message.content == "The command printed hi."
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "served 2 requests; 0 scripted answers left unused" in err
    recorded = json.loads(requests.read_text())
    assert [r["body"]["messages"][-1]["content"] for r in recorded] == ["run it", "and?"]
    assert all(r["path"] == "/v1/chat/completions" for r in recorded)
    assert "sk-secret-test-key" not in requests.read_text()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '[{"tool_call": []}]',
            "answer 1 of 1: cannot tell the answer's kind from 'tool_call' "
            "(did you mean 'tool_calls'?)",
        ),
        ('[{"text": "a", "usage": 3}]', "answer 1 of 1: unknown key 'usage'; valid here: text"),
        ('[{"text": 1}]', "text must be a string or a non-empty list of strings, got 1"),
        ('[{"error": 200}]', "error must be an HTTP status from 400 to 599, got 200"),
        (
            '[{"tool_calls": [{"nme": "x"}]}]',
            "tool call 1: unknown key 'nme' (did you mean 'name'?)",
        ),
        ('{"text": "a"}', "the script must be a JSON list of answers"),
        ('[{"text": "a"}', "line 1 column 15: not JSON"),
    ],
)
def test_a_bad_script_is_refused_naming_the_file_the_answer_and_the_fix(
    tmp_path: Path, content: str, expected: str
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(content)
    done = subprocess.run(
        [*MODULE, "--script", str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: {script}")
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_script_is_refused_with_its_path(tmp_path: Path) -> None:
    done = subprocess.run(
        [*MODULE, "--script", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"{tmp_path / 'nope.json'}: cannot read the script" in done.stderr
