"""The plugin registers both URL schemes, and loading it imports no driver."""

from __future__ import annotations

import subprocess
import sys

from pai.core.ext import get_plugins


def test_both_schemes_are_registered_by_this_distribution() -> None:
    backends = get_plugins().storage_backends()
    for scheme in ("postgresql", "postgres"):
        assert scheme in backends, f"{scheme}:// is not registered: {sorted(backends)}"
        assert backends[scheme].distribution == "pai-storage-postgres"
        assert backends[scheme].install_hint == "pip install pai-storage-postgres"


def test_loading_the_plugin_imports_neither_psycopg_nor_the_storage() -> None:
    code = (
        "import sys, pai.storage_postgres._plugin as p; p.pai_storage_backends(); "
        "print(sorted(m for m in ('psycopg', 'psycopg_pool', 'pai.storage_postgres._storage') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
