"""Sandbox skills through a real runtime and real providers (in-memory; Docker against a real
engine): the copy, its marker, scripts that run, re-created sandboxes, and seeded sandboxes."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from skills_golden.generated import skills as generated
from skills_helpers import (
    CountingProvider,
    read_tool_in_sandbox,
    run_tool_in_sandbox,
    tool_results,
)

from pai.core import ThreadHandle, define_agent
from pai.core.testing import ScriptedModel, create_test_runtime, text, tool_call, tool_calls
from pai.sandbox import sandbox_capability
from pai.skills import MARKER, define_skills

pytestmark = pytest.mark.anyio

CSV = next(e for e in generated if e.name == "csv-report")
PDF = next(e for e in generated if e.name == "pdf-forms")
FOLDER = "/workspace/.skills/csv-report"
# A copy first replaces the marker with a pending one, then writes the files and the new marker.
CSV_COPY = [
    f"{FOLDER}/{MARKER}",
    f"{FOLDER}/data/sample.csv",
    f"{FOLDER}/scripts/count.sh",
    f"{FOLDER}/{MARKER}",
]


def agent(skills: Any, model: Any) -> Any:
    return define_agent(
        name="analyst",
        model=model,
        instructions=skills.instructions,
        tools={**skills.tools, "run": run_tool_in_sandbox, "read": read_tool_in_sandbox},
    )


@asynccontextmanager
async def conversation(
    skills: Any, model: Any, provider: CountingProvider, *, seed: Any = ()
) -> AsyncIterator[ThreadHandle]:
    """A thread of the analyst agent, its sandbox from ``provider``; deleted afterwards."""
    binding = sandbox_capability(provider=provider, seed=seed)
    async with create_test_runtime(
        agent=agent(skills, model), capabilities={"sandbox": binding}
    ) as runtime:
        thread = await runtime.admin(identity="u").create_thread()
        yield thread
        await thread.delete()


async def send_once(skills: Any, model: Any, provider: CountingProvider, message: str) -> Any:
    """The result of one message in a new conversation."""
    async with conversation(skills, model, provider) as thread:
        return await thread.send(message)


def load(name: str, path: str = "SKILL.md") -> Any:
    return tool_call("skill", {"name": name, "path": path})


def run(command: str) -> Any:
    return tool_call("run", {"command": command})


def stdout(content: str) -> str:
    return json.loads(content)["stdout"]


async def test_loading_a_sandbox_skill_copies_its_folder_in_one_batch_and_its_script_runs_there(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [
            load("csv-report"),
            run(f"cd {FOLDER} && sh scripts/count.sh data/sample.csv"),
            run(f"test -x {FOLDER}/scripts/count.sh && echo executable"),
            text("done"),
        ]
    )
    result = await send_once(skills, model, provider, "count the rows")

    loaded, counted, mode = tool_results(result.messages)
    assert provider.writes == [CSV_COPY]
    assert f"This skill's folder in the sandbox is {FOLDER} (run its scripts from there)." in (
        loaded.content
    )
    assert stdout(counted.content) == "rows: 3\n"
    assert stdout(mode.content) == "executable\n"


async def test_a_second_load_finds_the_marker_current_and_writes_nothing(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [load("csv-report"), load("csv-report"), load("csv-report", "scripts/count.sh"), text("ok")]
    )
    result = await send_once(skills, model, provider, "go")

    assert provider.writes == [CSV_COPY]
    first, second, script = tool_results(result.messages)
    assert first.content == second.content
    assert script.content.startswith('<skill_file name="csv-report" path="scripts/count.sh">')


async def test_loads_of_one_skill_in_the_same_step_copy_it_once(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [
            tool_calls(
                ("skill", {"name": "csv-report"}),
                ("skill", {"name": "csv-report", "path": "scripts/count.sh"}),
                ("skill", {"name": "csv-report", "path": "data/sample.csv"}),
            ),
            text("ok"),
        ]
    )
    result = await send_once(skills, model, provider, "go")

    assert provider.writes == [CSV_COPY]
    assert [m.is_error for m in tool_results(result.messages)] == [False, False, False]


async def test_a_stale_copy_is_copied_again(provider: CountingProvider) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [
            load("csv-report"),
            run(f"echo old > {FOLDER}/{MARKER}"),
            load("csv-report"),
            run(f"cat {FOLDER}/{MARKER}"),
            text("ok"),
        ]
    )
    result = await send_once(skills, model, provider, "go")

    assert provider.writes == [CSV_COPY, CSV_COPY]
    marker = stdout(tool_results(result.messages)[3].content)
    assert marker.startswith("pai-skill csv-report ")


async def test_a_copy_that_cannot_be_written_fails_the_call_and_destroys_nothing(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [
            run(f"mkdir -p /workspace/.skills && echo mine > {FOLDER}"),
            load("csv-report"),
            run(f"cat {FOLDER}"),
            text("ok"),
        ]
    )
    result = await send_once(skills, model, provider, "go")

    _, loaded, kept = tool_results(result.messages)
    assert loaded.is_error
    assert loaded.content.startswith("Error: tool 'skill' failed: SandboxNotADirectoryError")
    assert FOLDER in loaded.content
    assert stdout(kept.content) == "mine\n"


async def test_a_recreated_sandbox_gets_the_skill_copied_again_with_environment_reset(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [
            load("csv-report"),
            text("loaded"),
            load("csv-report"),
            run(f"cd {FOLDER} && sh scripts/count.sh data/sample.csv"),
            text("ok"),
        ]
    )
    async with conversation(skills, model, provider) as thread:
        first = await thread.send("load it")
        [key] = provider.created
        await provider.inner.destroy(key)  # the sandbox expires behind the runtime's back
        second = await thread.send("again")

    [loaded] = tool_results(first.messages)
    reloaded, counted = tool_results(second.messages)
    assert "re-created" not in loaded.content
    assert provider.writes == [CSV_COPY, CSV_COPY]
    assert reloaded.content.endswith(
        "The sandbox was re-created: files written there earlier are gone. This skill's files "
        f"were copied into it again.\nThis skill's folder in the sandbox is {FOLDER} (run its "
        "scripts from there).\n</skill_content>"
    )
    assert stdout(counted.content) == "rows: 3\n"


async def test_sandbox_files_as_the_bindings_seed_make_the_first_load_write_nothing(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    model = ScriptedModel(
        [load("csv-report"), run(f"cd {FOLDER} && ./scripts/count.sh data/sample.csv"), text("ok")]
    )
    async with conversation(skills, model, provider, seed=skills.sandbox_files) as thread:
        result = await thread.send("go")

    # One batch: the seed, written when the sandbox was created. The load itself wrote nothing.
    assert provider.writes == [[seed.path for seed in skills.sandbox_files]]
    loaded, counted = tool_results(result.messages)
    assert f"folder in the sandbox is {FOLDER}" in loaded.content
    assert stdout(counted.content) == "rows: 3\n"


async def test_a_binary_asset_is_copied_byte_for_byte_and_loads_as_binary(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=True)
    stamp = "/workspace/.skills/pdf-forms/assets/stamp.png"
    model = ScriptedModel(
        [load("pdf-forms", "assets/stamp.png"), tool_call("read", {"path": stamp}), text("ok")]
    )
    result = await send_once(skills, model, provider, "stamp it")

    loaded, read = tool_results(result.messages)
    [asset] = [f for f in PDF.files if f["path"] == "assets/stamp.png"]
    assert asset["data"]["type"] == "data"
    assert read.content == asset["data"]["data"]
    assert base64.b64decode(read.content).startswith(b"\x89PNG")
    assert loaded.content == (
        '<skill_file name="pdf-forms" path="assets/stamp.png" binary="true">\n'
        "This is a binary file; use it from the sandbox, not as text. It is at "
        "/workspace/.skills/pdf-forms/assets/stamp.png in the sandbox.\n\n"
        "This skill's folder in the sandbox is /workspace/.skills/pdf-forms (run its scripts "
        "from there).\n"
        "</skill_file>"
    )


async def test_a_request_without_a_sandbox_acquires_the_capability_without_provisioning_one(
    provider: CountingProvider,
) -> None:
    skills = define_skills(skills=generated, sandbox=lambda _: False)
    model = ScriptedModel([load("release-notes"), load("csv-report"), text("ok")])
    result = await send_once(skills, model, provider, "go")

    notes, csv = tool_results(result.messages)
    assert notes.content.startswith('<skill_content name="release-notes">')
    assert csv.content == (
        "The skill 'csv-report' needs a sandbox, and this conversation has none, so it cannot be "
        "used here."
    )
    assert "csv-report" not in model.requests[0].instructions
    assert provider.created == []
    assert provider.writes == []
