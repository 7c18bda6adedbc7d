"""The real install path, as the README gives it: wheels built from this repository, pip-installed
into a fresh virtual environment of a project outside it, and ``pai`` used there, ``pai chat -p``
against the OpenAI-compatible test server among it.

The commands are read from the README, between its ``install-outside-the-repository`` markers,
and run as they stand, in their order, in one bash script (``~`` standing for a temporary folder),
so the README and this test cannot drift apart. Slow (it builds wheels and installs their
dependencies from the package index), so it runs in its own nox session: ``uv run nox -s e2e``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

if sys.platform == "win32":  # pragma: no cover - the README's commands are for a POSIX shell
    pytest.skip("the README's install commands are for bash on POSIX", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
START = "<!-- install-outside-the-repository:start -->"
END = "<!-- install-outside-the-repository:end -->"
STEP = "::: e2e step :::"


def readme_commands(text: str) -> list[str]:
    """The commands of the README's bash block between the markers (comments and blank lines
    left out), in order."""
    if text.count(START) != 1 or text.count(END) != 1:
        raise AssertionError(
            f"README.md must hold {START} and {END} once each, around the install commands"
        )
    section = text.split(START, 1)[1].split(END, 1)[0]
    block = re.fullmatch(r"\s*```bash\n(.*?)```\s*", section, flags=re.DOTALL)
    if block is None:
        raise AssertionError(f"between {START} and {END}, README.md must hold one ```bash block")
    commands = [
        line.strip()
        for line in block.group(1).splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    if not commands:
        raise AssertionError("the README's install block holds no command")
    return commands


@dataclass(frozen=True)
class Installed:
    """What the README's commands left: the folder ``~`` stood for, the project, its venv, and
    each command's output."""

    home: Path
    project: Path
    venv: Path
    outputs: dict[str, str]

    @property
    def wheels(self) -> Path:
        return self.home / "pai-wheels"


def _environ(**extra: str) -> dict[str, str]:
    """This process's environment without PAI_ settings or an active virtual environment."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PAI_") and key != "VIRTUAL_ENV"
    }
    environ.update(extra)
    return environ


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_environ(),
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    if shutil.which("uv") is None:
        pytest.fail("the README's commands need uv on PATH; install it with `pip install uv`")
    home = tmp_path_factory.mktemp("home")
    commands = readme_commands(README.read_text(encoding="utf-8"))
    # `~` is the one thing replaced: it stands for a temporary folder, here the test's own.
    concrete = [re.sub(r"(?<![\w/])~(?=/)", str(home), command) for command in commands]
    script = ["set -euo pipefail"]
    for command in concrete:
        script += [f"printf '%s\\n' {shlex.quote(STEP + ' ' + command)}", command]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=ROOT,  # step 1 runs in the repository's root
        env=_environ(),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    outputs: dict[str, str] = {}
    current = None
    for line in done.stdout.splitlines(keepends=True):
        if line.startswith(STEP + " "):
            current = line[len(STEP) + 1 :].rstrip("\n")
            outputs[current] = ""
        elif current is not None:
            outputs[current] += line
    if done.returncode != 0:
        pytest.fail(
            f"the README's install commands failed (exit {done.returncode}) at: {current}\n"
            f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
        )
    assert list(outputs) == concrete, "every README command ran, in order"
    project = home / "myapp"
    return Installed(home=home, project=project, venv=project / ".venv", outputs=outputs)


def _pai(
    installed: Installed, project: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.venv / "bin" / "pai"), *args],
        cwd=project,
        env=_environ(**env),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _output_of(installed: Installed, command: str) -> str:
    matching = [text for ran, text in installed.outputs.items() if ran == command]
    assert matching, f"the README's install block no longer runs `{command}`"
    return matching[0]


def test_the_readme_documents_building_the_wheels_and_installing_them_with_find_links() -> None:
    commands = readme_commands(README.read_text(encoding="utf-8"))
    build = [c for c in commands if c.startswith("uv build ")]
    install = [c for c in commands if c.startswith("pip install ")]
    assert len(build) == 1
    assert "--all-packages" in build[0]
    assert "--out-dir ~/" in build[0]
    assert len(install) == 1
    assert "--find-links ~/" in install[0]
    assert commands.index(build[0]) < commands.index(install[0])
    assert any(c.startswith("python3 -m venv ") for c in commands)
    with pytest.raises(AssertionError, match="must hold"):
        readme_commands("no markers here")
    with pytest.raises(AssertionError, match="one ```bash block"):
        readme_commands(f"{START}\nuv build\n{END}")


def test_the_readme_commands_build_install_and_run_pai_outside_the_repository(
    installed: Installed,
) -> None:
    assert not installed.project.is_relative_to(ROOT)
    assert sorted(p.name.split("-")[0] for p in installed.wheels.glob("*.whl")) == sorted(
        "pai_" + folder.name.replace("-", "_")
        for folder in (ROOT / "packages").iterdir()
        if (folder / "pyproject.toml").is_file()
    )
    plugins = _output_of(installed, "pai plugins")
    for distribution in ("pai-sandbox", "pai-sandbox-inmemory", "pai-model-openai"):
        assert re.search(rf"^{distribution}\s+{distribution}\s+0\.1\.0\s.*loaded", plugins, re.M), (
            plugins
        )
    assert _output_of(installed, "pai sandbox exec -- echo hello") == "hello\n"
    # The packages came from the wheels, not from this checkout (no editable install).
    site = _run(
        installed.venv / "bin" / "python",
        "-c",
        "import pai.core, pai.sandbox_inmemory; print(pai.core.__file__)",
    )
    assert str(installed.venv) in site
    assert str(ROOT) not in site


APP = '''\
"""An agent with one tool that runs a command in its sandbox."""

from pydantic import BaseModel

from pai.core import ToolContext, define_agent, define_tool
from pai.sandbox import CommandResult, sandbox


class RunInput(BaseModel):
    command: str


async def run(ctx: ToolContext[RunInput]) -> CommandResult:
    return await ctx.capabilities[sandbox].run_command(ctx.input.command, timeout=30)


coder = define_agent(
    name="coder",
    tools={
        "run_command": define_tool(
            id="run_command",
            description="Run a shell command in this conversation's sandbox.",
            input_schema=RunInput,
            capabilities={"sandbox": sandbox},
            execute=run,
        )
    },
)
'''

KEY = "sk-e2e-0123456789abcdefghijklmnopqrstuv"
"""The API key the chat sends; the test server accepts any, and no output may show it."""


@dataclass
class ModelServer:
    """The shipped OpenAI test server, running as a process."""

    process: subprocess.Popen[str]
    url: str
    requests_file: Path

    def stop(self) -> list[dict[str, Any]]:
        """Stop it (SIGTERM) and return the chat requests it received."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, err
        return json.loads(self.requests_file.read_text())


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[ModelServer]:
    """The test server (``python -m pai.model_openai.testing``) with a script: a tool call
    running a command in the sandbox, then a final answer."""
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {
                    "tool_calls": [
                        {
                            "name": "run_command",
                            "arguments": {"command": "echo $((6 * 7)) > n.txt && cat n.txt"},
                        }
                    ]
                },
                {"text": ["The sandbox ", "says 42."]},
            ]
        )
    )
    requests = tmp_path / "requests.json"
    command = [sys.executable, "-m", "pai.model_openai.testing", "--script", str(script)]
    process = subprocess.Popen(
        [*command, "--requests", str(requests)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    try:
        if not url.startswith("http://127.0.0.1:"):
            process.kill()
            pytest.fail(f"the test server did not start: {process.communicate(timeout=10)[1]}")
        yield ModelServer(process, url, requests)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)


def test_pai_chat_one_shot_runs_a_tool_in_the_inmemory_sandbox_against_the_test_server(
    installed: Installed, model_server: ModelServer
) -> None:
    project = installed.project
    (project / "chatapp.py").write_text(APP)
    (project / "pai.toml").write_text(
        textwrap.dedent(
            f"""\
            [model]
            provider = "openai"
            name = "test-model"

            [model.openai]
            base_url = "{model_server.url}"
            api_key_env = "E2E_MODEL_KEY"

            [capabilities.sandbox]
            provider = "inmemory"
            """
        )
    )
    help_text = _pai(installed, project, "chat", "--help").stdout
    if not re.search(r"(^|\s)-p,? ", help_text):
        pytest.fail(
            "`pai chat` has no -p/--prompt option (one-shot mode: pai chat MODULE:AGENT -p "
            f'"question" prints the answer and exits); `pai chat --help` says:\n{help_text}'
        )
    done = _pai(
        installed,
        project,
        "chat",
        "chatapp:coder",
        "-p",
        "What is six times seven? Ask the sandbox.",
        E2E_MODEL_KEY=KEY,
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "The sandbox says 42." in done.stdout
    # The tool call is shown, and its result: the exit code and the command's output.
    assert "run_command" in shown
    assert "exit 0" in shown
    assert re.search(r"^[\s|]*42\s*$", shown, re.M), shown
    assert KEY not in shown
    assert "Traceback" not in shown

    # What the model was sent proves the command ran in the sandbox: its output came back.
    sent = model_server.stop()
    assert len(sent) == 2, sent
    assert sent[0]["body"]["model"] == "test-model"
    assert sent[0]["body"]["messages"][-1]["content"] == "What is six times seven? Ask the sandbox."
    tool_messages = [m for m in sent[1]["body"]["messages"] if m.get("role") == "tool"]
    assert len(tool_messages) == 1, sent[1]["body"]["messages"]
    assert "42" in json.dumps(tool_messages[0]["content"])
    assert KEY not in model_server.requests_file.read_text()


def test_a_capability_package_installed_from_its_wheel_is_listed(installed: Installed) -> None:
    _run("uv", "build", "--wheel", "--out-dir", installed.wheels, ROOT / "examples" / "acme-vault")
    _run(
        installed.venv / "bin" / "pip",
        "install",
        "--quiet",
        "--find-links",
        installed.wheels,
        "acme-vault",
    )
    done = _pai(installed, installed.project, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["plugins"]
    loaded = {row["distribution"] for row in rows if row["status"] == "loaded"}
    assert {"pai-sandbox", "pai-sandbox-inmemory", "pai-model-openai", "acme-vault"} <= loaded


def test_uninstalling_the_provider_turns_the_config_into_a_clear_error(
    installed: Installed, tmp_path: Path
) -> None:
    # Last: it changes the installed environment.
    (tmp_path / "pai.toml").write_text('[capabilities.sandbox]\nprovider = "inmemory"\n')
    _run(installed.venv / "bin" / "pip", "uninstall", "--yes", "--quiet", "pai-sandbox-inmemory")
    done = _pai(installed, tmp_path, "sandbox", "exec", "--", "echo", "hi")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'inmemory'" in done.stderr
    assert "not installed" in done.stderr
    assert "pip install pai-sandbox-inmemory" in done.stderr
    assert "Traceback" not in done.stderr
