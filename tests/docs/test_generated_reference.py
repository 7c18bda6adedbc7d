"""The generated reference pages (docs/_gen_reference.py, an mkdocs hook) hold the real content.

Runs where mkdocs is not installed (`uv run nox -s examples`): the generator imports no mkdocs.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def public(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that has it: plugin names move between public
    modules (``pai.core`` to ``pai.core.ext``, ``pai.sandbox`` to ``pai.sandbox.provider``)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise AssertionError(f"{name} is in none of {modules}")


def get_plugins() -> Any:
    return public("get_plugins", "pai.core.ext", "pai.core")()


ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "_gen_reference.py"


@cache
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_gen_reference", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing look the module up by name
    spec.loader.exec_module(module)
    return module


@cache
def config_page() -> str:
    return generator().config_reference()


@cache
def cli_page() -> str:
    return generator().cli_reference()


def sandbox_providers() -> dict[str, Any]:
    lookup = public("sandbox_providers", "pai.sandbox.provider", "pai.sandbox")
    return dict(lookup(get_plugins()))


def section(page: str, heading: str) -> str:
    """The text of the section under ``heading``, up to the next heading (outside code blocks)."""
    lines = page[page.index(heading) :].splitlines()
    fenced = False
    for index, line in enumerate(lines[1:], start=1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            return "\n".join(lines[:index])
    return "\n".join(lines)


def test_the_generator_imports_no_mkdocs() -> None:
    # mkdocs made unimportable: the generator and its hook must still load and run.
    script = (
        "import importlib.util, sys; sys.modules['mkdocs'] = None; "
        f"spec = importlib.util.spec_from_file_location('_gen_reference', {str(GENERATOR)!r}); "
        "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; "
        "spec.loader.exec_module(m); "
        "assert m.on_page_markdown('<!-- generated: cli -->').count('pai config') > 0"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_local_processes_key_with_its_default_and_description() -> None:
    local = section(config_page(), "#### `[capabilities.sandbox.local]`")
    row = next(line for line in local.splitlines() if line.startswith("| <code>processes</code>"))
    assert "<code>512</code>" in row
    assert "processes the sandbox's user may have at once" in row
    assert "**pai-sandbox-local**" in local
    assert "processes = 512" in local


def test_every_registered_sandbox_provider_has_a_section() -> None:
    providers = sandbox_providers()
    assert {"inmemory", "local"} <= set(providers)
    page = config_page()
    for name, registration in providers.items():
        body = section(page, f"#### `[capabilities.sandbox.{name}]`")
        assert f"**{registration.distribution}**" in body
        for key in registration.options.model_fields:
            assert f"| <code>{key}</code> |" in body, (name, key)


def test_every_registration_has_a_section() -> None:
    plugins = get_plugins()
    page = config_page()
    for cap_id in plugins.capabilities():
        assert f"### `[capabilities.{cap_id}]`" in page
    for name in plugins.models():
        assert f"### `[model.{name}]`" in page
    for name in plugins.durability_engines():
        assert f'### `engine = "{name}"`' in page
    for scheme in plugins.storage_backends():
        assert f"<code>{scheme}://</code>" in page
    for table in ("capabilities", "chat", "durability", "model", "serve", "storage"):
        assert f"<code>[{table}]</code>" in page


def test_secrets_show_no_default() -> None:
    page = config_page()
    rows = [line for line in page.splitlines() if line.startswith("| <code>api_key</code>")]
    assert rows
    assert all("*not shown (secret)*" in row for row in rows)


def test_none_defaults_are_unset() -> None:
    local = section(config_page(), "#### `[capabilities.sandbox.local]`")
    row = next(line for line in local.splitlines() if line.startswith("| <code>state_dir</code>"))
    assert "unset (<code>None</code>)" in row
    assert "# state_dir = ...  # unset by default" in local


def test_table_cells_escape_pipes() -> None:
    bars = re.compile(r"(?<!\\)\|")  # a cell separator: a | not escaped
    for page in (config_page(), cli_page()):
        header: str | None = None
        for line in page.splitlines():
            if not line.startswith("|"):
                header = None
                continue
            header = header or line
            assert len(bars.findall(line)) == len(bars.findall(header)), line
    assert "<code>str &#124; None</code>" in config_page()


def test_every_toml_example_parses_and_validates() -> None:
    page = config_page()
    blocks = re.findall(r"^```toml\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    assert len(blocks) >= 8
    for block in blocks:
        tomllib.loads(block)
    for name, registration in sandbox_providers().items():
        example = section(page, f"#### `[capabilities.sandbox.{name}]`")
        block = re.search(r"```toml\n(.*?)```", example, re.DOTALL)
        assert block is not None
        options = tomllib.loads(block.group(1))["capabilities"]["sandbox"][name]
        required = [k for k, f in registration.options.model_fields.items() if f.is_required()]
        if not required:
            registration.options.model_validate(options)


def test_cli_page_documents_config_check() -> None:
    page = cli_page()
    config = section(page, "## `pai config`")
    assert "Usage: pai config [OPTIONS]" in config
    assert "<code>--check</code>" in config
    assert "pai config --check" in page or "--check" in config


def test_cli_page_walks_every_command_plugins_included() -> None:
    import click

    from pai.core.cli import create_cli

    page = cli_page()

    def walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = [path]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                if not sub.hidden:
                    found += walk(sub, (*path, name))
        return found

    paths = walk(create_cli(), ("pai",))
    assert len(paths) > 10
    for path in paths:
        assert f"`{' '.join(path)}` {{ #{'-'.join(path)} }}" in page, path
    assert "Provided by **pai-http**." in section(page, "## `pai serve`")
    assert f"{len(paths)} commands." in page


def test_the_hook_fills_markers_and_refuses_unknown_ones() -> None:
    module = generator()
    filled = module.on_page_markdown("# Config\n\n<!-- generated: config -->\n", page=None)
    assert "#### `[capabilities.sandbox.local]`" in filled
    assert module.on_page_markdown("no marker\n") == "no marker\n"
    with pytest.raises(module.GenerationError, match="unknown marker"):
        module.fill("<!-- generated: nothing -->\n")


@pytest.mark.parametrize("page", ["config", "cli"])
def test_the_pages_hold_their_marker(page: str) -> None:
    text = (ROOT / "docs" / "reference" / f"{page}.md").read_text()
    assert f"<!-- generated: {page} -->" in text
