"""Every command that reads the configuration stops at a misspelling in ``pai.toml`` and says
which file, which key and what the nearest valid name is, through the installed plugins."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.core.cli import create_cli


@pytest.fixture(autouse=True)
def work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> None:
    monkeypatch.chdir(tmp_path)


COMMANDS = [
    ("config",),
    ("config", "--check"),
    ("chat", "-p", "hi"),
    ("threads", "ls"),
    ("sandbox", "exec", "--", "true"),
    ("sandbox", "ls"),
    ("sandbox", "rm", "-f", "x"),
    ("sandbox", "prune", "--yes"),
    ("demo",),
]

# (pai.toml, the key the error must name, the suggestion it must make)
MISTAKES = {
    "table": ("[capabilties]\n", "[capabilties]", "did you mean 'capabilities'?"),
    "capability-id": (
        '[capabilities.sandbx]\nprovider = "inmemory"\n',
        "[capabilities.sandbx]",
        "did you mean 'sandbox'?",
    ),
    "provider": (
        '[capabilities.sandbox]\nprovider = "dokcer"\n',
        "[capabilities.sandbox] provider",
        "did you mean 'docker'?",
    ),
    "provider-option": (
        '[capabilities.sandbox]\nprovider = "docker"\n\n[capabilities.sandbox.docker]\n'
        'imgae = "x"\n',
        "[capabilities.sandbox.docker].imgae",
        "did you mean 'image'?",
    ),
    "model-option": (
        '[model]\nprovider = "openai"\nname = "m"\n\n[model.openai]\ntimout = 5\n',
        "model.openai.timout",
        "did you mean 'timeout'?",
    ),
}


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_names_the_file_the_key_and_the_nearest_name(
    command: tuple[str, ...], mistake: str
) -> None:
    content, key, suggestion = MISTAKES[mistake]
    Path("pai.toml").write_text(content)

    result = CliRunner().invoke(create_cli(), list(command), catch_exceptions=False)

    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert str(Path("pai.toml").resolve()) in result.stderr
    assert key in result.stderr
    assert suggestion in result.stderr
    assert "Traceback" not in result.output
