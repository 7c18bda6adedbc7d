"""``pai threads ls/show/rm`` and ``pai chat --continue/--thread/--scope`` over a real SQLite
file, the in-memory sandbox and scripted models, through the real CLI (click's runner)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli

SHELL = """
from pydantic import BaseModel

from pai.core import create_capability_binding, create_pai, define_agent, define_capability
from pai.core import define_tool
from pai.core.testing import FunctionModel, text, tool_call
from pai.sandbox import sandbox


class RunInput(BaseModel):
    command: str


async def run(ctx):
    result = await ctx.capabilities.sandbox.run_command(ctx.input.command)
    return result.stdout


def answer(request):
    last = request.messages[-1]
    if last.role == "tool":
        return text("ran: " + last.content.strip())
    if last.content.startswith("run "):
        return tool_call("run", {"command": last.content[4:]})
    return text(f"{len(request.messages)} messages so far")


coder = define_agent(
    name="coder",
    model=FunctionModel(answer),
    tools={"run": define_tool(id="run", description="Run a shell command.",
                              input_schema=RunInput, execute=run,
                              capabilities={"sandbox": sandbox})},
)


class Notes:
    def __init__(self, key):
        self.key = key


notes = define_capability(Notes, id="notes", description="A notebook that records disposal.")


class NoInput(BaseModel):
    pass


def dispose(input):
    with open("disposed.txt", "a") as file:
        file.write(input.key + "\\n")


def notes_answer(request):
    if request.messages[-1].role == "tool":
        return text("noted")
    return tool_call("note", {})


writer = define_agent(
    name="writer",
    model=FunctionModel(notes_answer),
    tools={"note": define_tool(id="note", description="Take a note.", input_schema=NoInput,
                               execute=lambda ctx: ctx.capabilities.notes.key,
                               capabilities={"notes": notes})},
)


def make_app():
    binding = create_capability_binding(
        capability=notes, acquire=lambda input: Notes(input.key), dispose=dispose
    )
    return create_pai(
        agents={"writer": {"agent": writer, "capabilities": {"notes": binding}}},
        scope_key=lambda identity: "cli",
    )
"""

STORED = (
    '[storage]\nurl = "sqlite:///threads.db"\n\n'
    '[capabilities.sandbox]\nprovider = "inmemory"\n\n'
    '[chat]\nagent = "shell:coder"\n'
)


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> Path:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory")
    (tmp_path / "shell.py").write_text(textwrap.dedent(SHELL), encoding="utf-8")
    (tmp_path / "pai.toml").write_text(STORED, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "shell", raising=False)
    monkeypatch.setattr(sys, "path", [*sys.path])  # the folders pai chat adds go with the test
    return tmp_path


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), list(args), input=stdin)


def new_thread(*args: str, stdin: str = "hello\n") -> str:
    """Chat once; the id of the thread it made."""
    result = invoke("chat", *args, stdin=stdin)
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if "come back to it with" in line]
    return line.split()[2]


def listed(*args: str) -> list[dict[str, object]]:
    result = invoke("threads", "ls", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["threads"]


# -- ls / show / rm -------------------------------------------------------------------------------


def test_ls_lists_the_threads_of_the_cli_scope_oldest_first_with_their_first_message() -> None:
    first = new_thread(stdin="hello\n")
    second = new_thread(stdin="run echo hi\n")

    threads = listed()

    assert [t["id"] for t in threads] == [first, second]
    assert [t["preview"] for t in threads] == ["hello", "run echo hi"]
    assert [t["messages"] for t in threads] == [2, 4]
    assert {t["agent"] for t in threads} == {"coder"}
    table = invoke("threads", "ls")
    assert first in table.stdout
    assert "FIRST MESSAGE" in table.stdout


def test_ls_of_another_scope_says_it_has_none() -> None:
    new_thread()

    result = invoke("threads", "ls", "--scope", "acme")

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "no threads in scope 'acme'" in result.stderr


def test_without_storage_ls_says_threads_live_in_one_process() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "shell:coder"\n')

    result = invoke("threads", "ls")

    assert result.exit_code == 2
    assert "no [storage] is configured" in result.stderr
    assert 'url = "sqlite:///threads.db"' in result.stderr


def test_show_prints_the_messages_of_a_thread() -> None:
    thread = new_thread(stdin="run echo hi\n")

    result = invoke("threads", "show", thread)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "you> run echo hi",
        '  -> run({"command": "echo hi"})',
        "  <- run:",
        "     | hi",
        "ran: hi",
    ]


def test_show_writes_out_control_characters_a_message_holds() -> None:
    thread = new_thread(stdin="run printf '\\033[2J'\n")

    result = invoke("threads", "show", thread)

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout
    assert "     | \\x1b[2J" in result.stdout


def test_show_json_gives_the_thread_and_every_message() -> None:
    thread = new_thread(stdin="run echo hi\n")

    result = invoke("threads", "show", thread, "--json")

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["thread"]["id"] == thread
    assert shown["thread"]["scope"] == "cli"
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert shown["messages"][2]["content"] == "hi\n"


def test_show_of_a_missing_thread_exits_1() -> None:
    result = invoke("threads", "show", "nope")

    assert result.exit_code == 1
    assert "no thread 'nope'" in result.stderr


def test_a_thread_of_another_scope_is_named_with_its_scope() -> None:
    thread = new_thread("--scope", "acme")

    result = invoke("threads", "show", thread)

    assert result.exit_code == 1
    assert "is not in scope 'cli' but in scope 'acme'; pass --scope acme" in result.stderr
    assert invoke("threads", "show", thread, "--scope", "acme").exit_code == 0


def test_rm_removes_the_thread_and_only_it() -> None:
    first = new_thread()
    second = new_thread()

    result = invoke("threads", "rm", first)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [first]
    assert [t["id"] for t in listed()] == [second]


def test_rm_of_a_missing_thread_exits_1_and_force_makes_it_succeed() -> None:
    thread = new_thread()
    assert invoke("threads", "rm", thread).exit_code == 0

    again = invoke("threads", "rm", thread)
    forced = invoke("threads", "rm", thread, "--force")

    assert again.exit_code == 1
    assert f"no thread {thread!r}" in again.stderr
    assert forced.exit_code == 0, forced.output
    assert forced.stderr == ""


def test_rm_disposes_what_the_thread_owns_through_the_runtime() -> None:
    result = invoke("chat", "shell:make_app", stdin="note it\n")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if "come back to it with" in line]
    thread = line.split()[2]
    key = f"pai1.thread.notes.cli.{thread}"
    assert key in result.stdout  # the note tool returned the instance key
    assert not Path("disposed.txt").exists()

    removed = invoke("threads", "rm", thread, "--target", "shell:make_app", "--json")

    assert removed.exit_code == 0, removed.output
    assert Path("disposed.txt").read_text().splitlines() == [key]
    assert json.loads(removed.stdout)["removed"] == [
        {"id": thread, "disposed": [{"capability": "notes", "key": key}]}
    ]


def test_scope_overrides_an_apps_scope_key_for_chat_ls_and_rm() -> None:
    result = invoke("chat", "shell:make_app", "--scope", "acme", stdin="note it\n")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if "come back to it with" in line]
    thread = line.split()[2]
    key = f"pai1.thread.notes.acme.{thread}"
    assert key in result.stdout
    assert f"`pai threads rm {thread} --target shell:make_app --scope acme`" in result.stderr

    assert listed("--target", "shell:make_app") == []
    assert [t["id"] for t in listed("--target", "shell:make_app", "--scope", "acme")] == [thread]
    removed = invoke("threads", "rm", thread, "--target", "shell:make_app", "--scope", "acme")

    assert removed.exit_code == 0, removed.output
    assert Path("disposed.txt").read_text().splitlines() == [key]


def test_rm_without_a_target_says_it_needs_the_agent() -> None:
    Path("pai.toml").write_text('[storage]\nurl = "sqlite:///threads.db"\n')

    result = invoke("threads", "rm", "abc")

    assert result.exit_code == 2
    assert "--target MODULE:AGENT" in result.stderr


# -- pai chat and threads ---------------------------------------------------------------------


def test_continue_goes_on_with_the_latest_thread() -> None:
    new_thread(stdin="first\n")
    latest = new_thread(stdin="second\n")

    result = invoke("chat", "--continue", stdin="again\n")

    assert result.exit_code == 0, result.output
    assert f"going on with thread {latest}" in result.stderr
    assert "3 messages so far" in result.stdout  # second, its answer, again
    assert [t["messages"] for t in listed()] == [2, 4]


def test_continue_without_a_thread_says_there_is_none() -> None:
    result = invoke("chat", "--continue", stdin="hi\n")

    assert result.exit_code == 2
    assert "agent 'coder' has no thread in scope 'cli'" in result.stderr


def test_with_storage_in_memory_ls_says_threads_live_in_one_process() -> None:
    Path("pai.toml").write_text('[storage]\nurl = "memory://"\n')

    result = invoke("threads", "ls")

    assert result.exit_code == 2
    assert "the [storage] configured" in result.stderr
    assert "is in memory" in result.stderr


def test_continue_without_storage_says_threads_are_not_kept() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "shell:coder"\n')

    result = invoke("chat", "--continue", stdin="hi\n")

    assert result.exit_code == 2
    assert "--continue goes on with a stored thread, but no [storage] is configured" in (
        result.stderr
    )


def test_thread_of_another_scope_needs_scope() -> None:
    thread = new_thread("--scope", "acme")

    refused = invoke("chat", "--thread", thread, stdin="hi\n")
    resumed = invoke("chat", "--thread", thread, "--scope", "acme", stdin="hi\n")

    assert refused.exit_code == 1
    assert "pass --scope acme" in refused.stderr
    assert resumed.exit_code == 0, resumed.output
    assert "3 messages so far" in resumed.stdout


def test_thread_and_continue_together_are_refused() -> None:
    result = invoke("chat", "--thread", "abc", "--continue", stdin="hi\n")

    assert result.exit_code == 2
    assert "give one of them" in result.stderr


def test_chat_says_at_exit_which_sandbox_it_leaves_and_how_to_remove_it() -> None:
    thread = new_thread(stdin="run echo hi\n")
    result = invoke("chat", "--thread", thread, stdin="hi\n")

    key = f"pai1.thread.sandbox.cli.{thread}"
    assert f"thread {thread} leaves its sandbox {key} (provider 'inmemory')." in result.stderr
    assert f"`pai threads rm {thread}` (the thread and its sandbox)" in result.stderr
    assert f"`pai sandbox rm {key}`" in result.stderr


def test_a_chat_that_used_no_sandbox_says_none_is_left() -> None:
    result = invoke("chat", stdin="hello\n")

    assert result.exit_code == 0, result.output
    assert "come back to it with" in result.stderr
    assert "leaves its sandbox" not in result.stderr


def test_the_exit_message_names_the_target_and_scope_rm_needs() -> None:
    result = invoke("chat", "shell:coder", "--scope", "acme", stdin="run echo hi\n")

    assert result.exit_code == 0, result.output
    assert "--target shell:coder --scope acme` (the thread and its sandbox)" in result.stderr


def test_without_storage_the_exit_message_says_the_thread_ends_but_the_sandbox_may_not() -> None:
    Path("pai.toml").write_text('[capabilities.sandbox]\nprovider = "inmemory"\n')

    result = invoke("chat", "shell:coder", stdin="run echo hi\n")

    assert result.exit_code == 0, result.output
    assert "The thread itself ends now: no [storage] is configured." in result.stderr
    assert "`pai sandbox rm pai1.thread.sandbox.cli." in result.stderr
    assert "pai threads rm" not in result.stderr


# -- on Docker: the container a chat leaves, and rm removing it ---------------------------------

DOCKER_IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")


@pytest.fixture
def docker_namespace(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    """A Docker client and a fresh namespace for the containers of one test (removed after);
    skips without an engine and the test image."""
    docker = pytest.importorskip("docker", reason="the docker SDK (pai-sandbox-docker) is needed")
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(DOCKER_IMAGE)
    except Exception as error:
        pytest.skip(f"no usable Docker engine with image {DOCKER_IMAGE!r}: {error}")
    namespace = f"pai-test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-docker")
    try:
        yield client, namespace
    finally:
        for container in client.containers.list(
            all=True, filters={"label": f"pai.namespace={namespace}"}
        ):
            container.remove(force=True)
        client.close()


def test_on_docker_chat_names_the_container_it_leaves_and_rm_removes_it(
    docker_namespace: tuple[Any, str],
) -> None:
    client, namespace = docker_namespace
    Path("pai.toml").write_text(
        '[storage]\nurl = "sqlite:///threads.db"\n\n'
        '[capabilities.sandbox]\nprovider = "docker"\n\n'
        f'[capabilities.sandbox.docker]\nimage = "{DOCKER_IMAGE}"\nnamespace = "{namespace}"\n\n'
        '[chat]\nagent = "shell:coder"\n'
    )

    def containers() -> list[Any]:
        return client.containers.list(all=True, filters={"label": f"pai.namespace={namespace}"})

    result = invoke("chat", stdin="run echo hi\n")
    assert result.exit_code == 0, result.output
    assert "ran: hi" in result.stdout
    [line] = [line for line in result.stderr.splitlines() if "come back to it with" in line]
    thread = line.split()[2]
    key = f"pai1.thread.sandbox.cli.{thread}"
    assert f"leaves its sandbox {key} (provider 'docker')." in result.stderr
    assert len(containers()) == 1

    removed = invoke("threads", "rm", thread)

    assert removed.exit_code == 0, removed.output
    assert containers() == []
    assert invoke("threads", "show", thread).exit_code == 1
