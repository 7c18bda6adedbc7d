"""The real install path: wheels built from this repository, pip-installed into a fresh virtual
environment, used through the ``pai`` command there.

Slow (it builds wheels and installs their dependencies from the package index), so it runs in its
own nox session: ``uv run nox -s e2e``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["packages/core", "packages/sandbox", "packages/sandbox-inmemory", "examples/acme-vault"]


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build the wheels; install it with `pip install uv`")
    out = tmp_path_factory.mktemp("wheels")
    for package in PACKAGES:
        _run(uv, "build", "--wheel", "--out-dir", out, ROOT / package)
    built = sorted(out.glob("*.whl"))
    assert len(built) == len(PACKAGES), built
    return built


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, wheels: list[Path]) -> Path:
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *wheels)
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pai.toml").write_text('[capabilities.sandbox]\nprovider = "inmemory"\n')
    return tmp_path


def _pai(env: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PAI_")}
    return subprocess.run(
        [str(env / "bin" / "pai"), *args],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )


def test_pai_plugins_lists_the_installed_distributions(env: Path, project: Path) -> None:
    done = _pai(env, project, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["plugins"]
    loaded = {row["distribution"] for row in rows if row["status"] == "loaded"}
    assert {"pai-sandbox", "pai-sandbox-inmemory", "acme-vault"} <= loaded


def test_pai_sandbox_exec_runs_through_the_configured_provider(env: Path, project: Path) -> None:
    done = _pai(env, project, "sandbox", "exec", "--", "echo", "hi")
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr


def test_uninstalling_the_provider_turns_the_config_into_a_clear_error(
    env: Path, project: Path
) -> None:
    python = env / "bin" / "python"
    _run(python, "-m", "pip", "uninstall", "--yes", "--quiet", "pai-sandbox-inmemory")
    done = _pai(env, project, "sandbox", "exec", "--", "echo", "hi")
    assert done.returncode == 2
    assert "'inmemory'" in done.stderr
    assert "not installed" in done.stderr
    assert "pip install pai-sandbox-inmemory" in done.stderr
    assert "Traceback" not in done.stderr


if sys.platform == "win32":  # pragma: no cover - the venv layout above is POSIX
    pytestmark = pytest.mark.skip(reason="the e2e test uses the POSIX virtual-environment layout")
