"""`pai serve`: safe defaults, [serve] in pai.toml, clear errors, and a real server."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from pai.core.cli import create_cli

TESTS = Path(__file__).parent


def invoke(*args: str, cwd: Path = TESTS, command: str = "serve") -> tuple[int, str]:
    """``pai COMMAND ARGS`` run in ``cwd``: its exit code and output."""
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(create_cli(), [command, *args])
    return result.exit_code, result.output


def test_a_public_address_without_auth_is_refused() -> None:
    code, output = invoke("serve_app:pai", "--host", "0.0.0.0")
    assert code != 0
    assert "refusing to serve 0.0.0.0 without authentication" in output
    assert "--insecure-no-auth" in output


def test_a_wrong_target_says_what_is_wrong() -> None:
    code, output = invoke("serve_app:pia")
    assert code != 0
    assert "has no attribute 'pia'" in output
    assert "did you mean 'pai'" in output
    code, output = invoke("no_such_module:pai")
    assert "there is no module 'no_such_module'" in output
    code, output = invoke()
    assert "no app to serve" in output


def test_more_than_one_worker_needs_a_shared_storage() -> None:
    code, output = invoke("serve_app:pai", "--workers", "2")
    assert code != 0
    assert "needs a storage the worker processes share" in output
    # A SQLite file shares threads, not runs: a resume could reach a worker without the run.
    code, output = invoke("serve_app:make_sqlite_app", "--workers", "2")
    assert code != 0
    assert "SqliteStorage, which carries no run between processes" in output
    assert "PostgreSQL" in output


def test_an_unknown_serve_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "pai.toml").write_text("[serve]\nprot = 9000\n")
    (tmp_path / "serve_app.py").write_text((TESTS / "serve_app.py").read_text())
    code, output = invoke("serve_app:pai", cwd=tmp_path)
    assert code != 0
    assert "unknown key serve.prot" in output
    assert "did you mean 'port'" in output


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[servre]\nport = 9000\n", "did you mean 'serve'"),
        ("[capabilities.sandbx]\nprovider = 'docker'\n", "did you mean 'sandbox'"),
        ("[capabilities.sandbox]\nprovider = 'dockr'\n", "did you mean 'docker'"),
        (
            "[capabilities.sandbox]\nprovider = 'inmemory'\n"
            "[capabilities.sandbox.inmemory]\nmax_wrokers = 2\n",
            "did you mean 'max_workers'",
        ),
    ],
)
def test_pai_serve_stops_on_a_misspelt_configuration(
    tmp_path: Path, toml: str, expected: str
) -> None:
    # pai serve reads configuration as every command does: a misspelling is an error naming the
    # file, not a server started on defaults.
    (tmp_path / "pai.toml").write_text(toml)
    (tmp_path / "serve_app.py").write_text((TESTS / "serve_app.py").read_text())
    code, output = invoke("serve_app:pai", cwd=tmp_path)
    assert code != 0
    assert expected in output
    assert "pai.toml" in output


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_pai_serve_serves_the_app_its_page_and_the_local_identity(tmp_path: Path) -> None:
    port = _port()
    (tmp_path / "pai.toml").write_text(f'[serve]\nport = {port}\ntarget = "serve_app:make_app"\n')
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "pai.core", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                ready = httpx.get(f"{url}/readyz")
                break
            except httpx.TransportError:
                assert server.poll() is None, server.communicate()[0].decode()
                assert time.monotonic() < deadline, "pai serve did not start"
                time.sleep(0.1)
        assert ready.json()["agents"] == ["coder", "helper"]
        page = httpx.get(url)
        assert page.status_code == 200
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert '<script type="module" src="assets/app.js">' in page.text
        assert (
            httpx.get(f"{url}/assets/app.js").headers["content-type"].startswith("text/javascript")
        )
        assert httpx.get(f"{url}/assets/../pyproject.toml").status_code == 404
        with httpx.stream(
            "POST",
            f"{url}/agents/coder/chat",
            json={
                "id": "t1",
                "trigger": "submit-message",
                "messages": [
                    {"id": "m", "role": "user", "parts": [{"type": "text", "text": "run it"}]}
                ],
            },
        ) as response:
            assert response.status_code == 200
            assert list(response.iter_lines())[-2] == "data: [DONE]"
        assert [t["id"] for t in httpx.get(f"{url}/threads").json()["threads"]] == ["t1"]
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_addresses_need_no_auth(host: str) -> None:
    from pai.http._serve import _is_loopback

    assert _is_loopback(host)
    assert not _is_loopback("0.0.0.0")
    assert not _is_loopback("10.0.0.1")


def test_pai_config_check_names_a_wrong_serve_key_and_its_file(tmp_path: Path) -> None:
    (tmp_path / "pai.toml").write_text('[serve]\nport = "eighty"\n')
    code, output = invoke("--check", cwd=tmp_path, command="config")
    assert code != 0
    assert "serve.port = 'eighty'" in output
    assert "pai.toml" in output
    assert "must be int" in output
