"""Updating a sandbox skill's copy on real providers (in-memory; Docker against a real engine):
what a new version no longer has is removed, only what the skill put there, never through a
symlink or a path a rewritten marker makes up, and an interrupted update leaves a marker that
claims no version."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from skills_golden.generated import skills as generated
from skills_helpers import CountingProvider

from pai.core.testing import run_tool
from pai.sandbox import (
    Sandbox,
    SandboxProviderError,
    create_sandbox_session_manager,
)
from pai.skills import MARKER, SkillEntry, SkillFile, Skills, SkillToolOk, define_skills

pytestmark = pytest.mark.anyio

CSV = next(e for e in generated if e.name == "csv-report")
FOLDER = "/workspace/.skills/csv-report"


def text_file(path: str, text: str = "x\n") -> SkillFile:
    return {"path": path, "data": {"type": "text", "text": text}}


def version(*extra: SkillFile) -> Skills[str, Any]:
    """csv-report with ``extra`` files besides its own."""
    entry = SkillEntry(
        name=CSV.name,
        description=CSV.description,
        body=CSV.body,
        files=tuple(sorted((*CSV.files, *extra), key=lambda f: f["path"])),
        requires_sandbox=True,
    )
    return define_skills(skills=[entry], sandbox=True)


V1 = version(text_file("scripts/old.sh", "echo old\n"), text_file("old/nested/notes.md"))
V2 = version()


@asynccontextmanager
async def sandbox_of(
    provider: CountingProvider, make: Callable[..., Sandbox] = Sandbox
) -> AsyncIterator[Sandbox]:
    manager = create_sandbox_session_manager(provider=provider)
    try:
        yield make(manager.handle("skills-update"))
    finally:
        await manager.dispose("skills-update")
        await manager.aclose()


async def load(skills: Skills[str, Any], sandbox: Sandbox) -> SkillToolOk:
    ran = await run_tool(
        skills.tool, input={"name": "csv-report"}, capabilities={"sandbox": sandbox}
    )
    output = ran.expect_output()
    assert isinstance(output, SkillToolOk)
    return output


async def load_failing(skills: Skills[str, Any], sandbox: Sandbox) -> str:
    """The error the model reads when loading the skill fails."""
    ran = await run_tool(
        skills.tool, input={"name": "csv-report"}, capabilities={"sandbox": sandbox}
    )
    assert ran.result.is_error
    return ran.result.content


async def tree(sandbox: Sandbox, folder: str = FOLDER) -> list[str]:
    """Every path under ``folder``: folders end in ``/``, symlinks in ``@``."""
    found: list[str] = []

    async def walk(relative: str) -> None:
        for entry in await sandbox.list_dir(f"{folder}/{relative}".rstrip("/")):
            path = f"{relative}{entry.name}"
            if entry.type == "directory":
                found.append(f"{path}/")
                await walk(f"{path}/")
            else:
                found.append(path if entry.type == "file" else f"{path}@")

    await walk("")
    return found


def marker_of(skills: Skills[str, Any]) -> bytes:
    [marker] = [seed.content for seed in skills.sandbox_files if seed.path.endswith(MARKER)]
    assert isinstance(marker, bytes)
    return marker


V2_TREE = [".pai-skill", "data/", "data/sample.csv", "scripts/", "scripts/count.sh"]


async def test_an_update_removes_the_files_and_folders_the_new_version_no_longer_has(
    provider: CountingProvider,
) -> None:
    async with sandbox_of(provider) as sandbox:
        await load(V1, sandbox)
        assert "scripts/old.sh" in await tree(sandbox)
        await load(V2, sandbox)

        assert await tree(sandbox) == V2_TREE
        assert await sandbox.read_file(f"{FOLDER}/{MARKER}") == marker_of(V2)
        # And back: the older version's files return.
        await load(V1, sandbox)
        assert "old/nested/notes.md" in await tree(sandbox)
        assert await sandbox.read_file(f"{FOLDER}/{MARKER}") == marker_of(V1)


async def test_the_marker_lists_the_files_the_copy_wrote(provider: CountingProvider) -> None:
    async with sandbox_of(provider) as sandbox:
        await load(V2, sandbox)
        marker = (await sandbox.read_file(f"{FOLDER}/{MARKER}")).decode().splitlines()

    assert marker[0].startswith("pai-skill csv-report ")
    assert [json.loads(line) for line in marker[1:]] == ["data/sample.csv", "scripts/count.sh"]


async def test_a_users_files_in_the_skill_folder_and_elsewhere_are_kept(
    provider: CountingProvider,
) -> None:
    async with sandbox_of(provider) as sandbox:
        await load(V1, sandbox)
        await sandbox.write_files(
            {
                f"{FOLDER}/report.txt": "mine\n",  # the user's, next to the skill's files
                f"{FOLDER}/old/nested/draft.md": "mine too\n",  # in a folder the update empties
                "/workspace/scripts/old.sh": "the user's own old.sh\n",
            }
        )
        await load(V2, sandbox)

        assert await tree(sandbox) == [
            ".pai-skill",
            "data/",
            "data/sample.csv",
            "old/",
            "old/nested/",
            "old/nested/draft.md",
            "report.txt",
            "scripts/",
            "scripts/count.sh",
        ]
        assert await sandbox.read_text("/workspace/scripts/old.sh") == "the user's own old.sh\n"


async def test_a_file_that_becomes_a_folder_and_back_is_updated(
    provider: CountingProvider,
) -> None:
    as_file = version(text_file("scripts/lib", "a file\n"))
    as_folder = version(text_file("scripts/lib/util.sh", "echo util\n"))
    async with sandbox_of(provider) as sandbox:
        await load(as_file, sandbox)
        await load(as_folder, sandbox)
        assert "scripts/lib/util.sh" in await tree(sandbox)
        await load(as_file, sandbox)

        assert await sandbox.read_text(f"{FOLDER}/scripts/lib") == "a file\n"
        assert "scripts/lib/" not in await tree(sandbox)
        assert await sandbox.read_file(f"{FOLDER}/{MARKER}") == marker_of(as_file)


async def test_a_rewritten_marker_cannot_make_the_update_remove_anything_outside(
    provider: CountingProvider,
) -> None:
    async with sandbox_of(provider) as sandbox:
        await load(V1, sandbox)
        precious = {
            "/workspace/precious.txt": "keep\n",
            "/workspace/elsewhere/old.sh": "keep\n",
            "/workspace/elsewhere/notes.md": "keep\n",
        }
        await sandbox.write_files(precious)
        # Commands in the sandbox can rewrite the marker and swap folders for symlinks.
        result = await sandbox.run_command(
            f"cd {FOLDER} && rm -r old && ln -s /workspace/elsewhere old"
            f" && mkdir -p data/deep && ln -s /workspace/elsewhere data/deep/link"
        )
        assert result.ok, result.stderr
        hostile = [
            "/workspace/precious.txt",
            "../../precious.txt",
            "scripts/../../../precious.txt",
            "./scripts/old.sh",
            "old/old.sh",
            "old/notes.md",
            "data/deep/link/old.sh",
            "data/deep/link",
            "scripts/old.sh",
        ]
        marker = "pai-skill csv-report 0\n" + "".join(f"{json.dumps(p)}\n" for p in hostile)
        await sandbox.write_file(f"{FOLDER}/{MARKER}", marker)
        await load(V2, sandbox)

        for path, content in precious.items():
            assert await sandbox.read_text(path) == content
        # scripts/old.sh is the skill's and goes; the links are not the skill's files and stay.
        assert await tree(sandbox) == [
            ".pai-skill",
            "data/",
            "data/deep/",
            "data/deep/link@",
            "data/sample.csv",
            "old@",
            "scripts/",
            "scripts/count.sh",
        ]
        assert await sandbox.read_file(f"{FOLDER}/{MARKER}") == marker_of(V2)


async def test_a_skill_folder_that_is_a_symlink_is_neither_written_nor_cleaned_through(
    provider: CountingProvider,
) -> None:
    async with sandbox_of(provider) as sandbox:
        await load(V1, sandbox)
        result = await sandbox.run_command(
            f"mv {FOLDER} /workspace/moved && ln -s /workspace/moved {FOLDER}"
        )
        assert result.ok, result.stderr
        failed = await load_failing(V2, sandbox)

        assert failed == (
            "Error: tool 'pai.skills.skill' failed: SkillCopyError: cannot copy the skill "
            f"'csv-report' into the sandbox: {FOLDER} is a symlink where the skill's own files "
            "go, and writing through a symlink would write wherever it points; remove it (rm "
            f"{FOLDER}) and load the skill again"
        )
        assert await sandbox.read_text("/workspace/moved/scripts/old.sh") == "echo old\n"
        assert await sandbox.read_file("/workspace/moved/.pai-skill") == marker_of(V1)
        # Once the link is gone, the skill loads.
        await sandbox.remove(FOLDER)  # the link, not its target
        await load(V2, sandbox)
        assert await tree(sandbox) == V2_TREE


@pytest.mark.parametrize(
    "link", ["scripts", "scripts/count.sh", MARKER], ids=["folder", "file", "marker"]
)
async def test_a_symlink_where_the_skill_writes_fails_the_load_and_writes_nothing(
    provider: CountingProvider, link: str
) -> None:
    async with sandbox_of(provider) as sandbox:
        await sandbox.write_files(
            {"/workspace/elsewhere/count.sh": "mine\n", "/workspace/elsewhere/target": "mine\n"}
        )
        target = "/workspace/elsewhere" if link == "scripts" else "/workspace/elsewhere/target"
        parent = FOLDER if link == "scripts" else f"{FOLDER}/scripts"
        result = await sandbox.run_command(f"mkdir -p {parent} && ln -s {target} {FOLDER}/{link}")
        assert result.ok, result.stderr
        writes = len(provider.writes)
        failed = await load_failing(V2, sandbox)

        assert "SkillCopyError: cannot copy the skill 'csv-report' into the sandbox: " in failed
        assert f"{FOLDER}/{link} is a symlink" in failed
        assert f"(rm {FOLDER}/{link})" in failed
        assert len(provider.writes) == writes
        assert await sandbox.read_text("/workspace/elsewhere/count.sh") == "mine\n"
        assert await sandbox.read_text("/workspace/elsewhere/target") == "mine\n"


async def test_another_skills_marker_lists_nothing_to_remove(provider: CountingProvider) -> None:
    async with sandbox_of(provider) as sandbox:
        await load(V1, sandbox)
        await sandbox.write_file(f"{FOLDER}/{MARKER}", 'pai-skill pdf-forms 0\n"scripts/old.sh"\n')
        await load(V2, sandbox)

        assert "scripts/old.sh" in await tree(sandbox)
        assert await sandbox.read_file(f"{FOLDER}/{MARKER}") == marker_of(V2)


class Interrupting(Sandbox):
    """A sandbox whose engine fails once, at the first call of ``operation`` after it is armed
    (the engine going away in the middle of an update)."""

    operation = ""
    armed = False

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        self._maybe_fail("remove")
        await super().remove(path, recursive=recursive)

    async def write_files(self, files: Any) -> None:
        files = list(files)
        if len(files) > 1:  # the pending marker is written alone first
            self._maybe_fail("write_files")
        await super().write_files(files)

    def _maybe_fail(self, operation: str) -> None:
        if self.armed and operation == self.operation:
            self.armed = False
            raise SandboxProviderError(f"the engine went away during {operation}")


@pytest.mark.parametrize("operation", ["remove", "write_files"])
async def test_an_interrupted_update_leaves_a_marker_claiming_no_version(
    provider: CountingProvider, operation: str
) -> None:
    async with sandbox_of(provider, Interrupting) as sandbox:
        assert isinstance(sandbox, Interrupting)
        await load(V1, sandbox)
        sandbox.operation = operation
        sandbox.armed = True
        with pytest.raises(AssertionError, match="SandboxProviderError: the engine went away"):
            await load(V2, sandbox)  # the tool call fails, and the model reads why

        marker = await sandbox.read_file(f"{FOLDER}/{MARKER}")
        assert marker.startswith(b"pai-skill csv-report copying\n")
        assert marker not in (marker_of(V1), marker_of(V2))
        # The next load of either version copies again; the pending marker's list lets it clean.
        await load(V2, sandbox)
        assert await tree(sandbox) == V2_TREE
        assert await sandbox.read_file(f"{FOLDER}/{MARKER}") == marker_of(V2)


async def test_an_update_without_files_to_remove_is_still_one_batch(
    provider: CountingProvider,
) -> None:
    edited = version(text_file("scripts/old.sh", "echo new\n"), text_file("old/nested/notes.md"))
    async with sandbox_of(provider) as sandbox:
        await load(V1, sandbox)
        before = len(provider.writes)
        await load(edited, sandbox)

        assert len(provider.writes) == before + 1
        assert provider.calls_to("remove") == []
        assert await sandbox.read_text(f"{FOLDER}/scripts/old.sh") == "echo new\n"
