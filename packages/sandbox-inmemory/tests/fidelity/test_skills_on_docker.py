"""The corpus's ``skills`` scripts (written as published Agent Skills write theirs: argument
loops, ``set -euo pipefail``, here-documents, traps, JSON and CSV through jq and awk) run on the
Docker provider, in an image with GNU bash and tools, exactly as on in-memory: same stdout, same
stderr shape, same exit code. The bash comparison (``test_fidelity.py``) says in-memory behaves as
bash; this one says a skill moved from the default provider to Docker keeps its behaviour.

The image is ``PAI_DOCKER_BASH_TEST_IMAGE`` (``pai-test-bash:latest`` by default, made by
``scripts/build-test-image.sh``). Without an engine or the image the test skips, or fails when
``PAI_REQUIRE_DOCKER=1`` (as in CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fidelity._fidelity import Outcome, compare, load_corpus, run_all_in_sandbox
from inmemory_helpers import MakeProvider

from pai.sandbox_docker import DockerSandboxProvider

IMAGE = os.environ.get("PAI_DOCKER_BASH_TEST_IMAGE", "pai-test-bash:latest")
REQUIRE = os.environ.get("PAI_REQUIRE_DOCKER") == "1"
SKILLS = [case for case in load_corpus() if case.name.startswith("skills/")]

# A container's first command pays for its start: far more than the oracle's three seconds.
DOCKER_TIMEOUT = 60.0


@pytest.fixture
def anyio_backend() -> str:
    """Once is enough: the comparison is of shells, not of event loops."""
    return "asyncio"


@pytest.fixture
def docker_namespace() -> Iterator[str]:
    """A namespace of its own; afterwards, no container of it may be left."""
    try:
        import docker

        client: Any = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except Exception as error:
        reason = (
            f"no usable Docker engine with image {IMAGE!r} (scripts/build-test-image.sh): {error}"
        )
        if REQUIRE:
            pytest.fail(f"PAI_REQUIRE_DOCKER=1 but {reason}")
        pytest.skip(reason)
    namespace = f"pai-fidelity-{uuid.uuid4().hex[:12]}"
    try:
        yield namespace
    finally:
        label = {"label": f"pai.namespace={namespace}"}
        left = client.containers.list(all=True, filters=label)
        for container in left:
            container.remove(force=True)
        client.close()
        assert not left, f"containers left behind: {[c.name for c in left]}"


def test_the_corpus_has_skills_scripts() -> None:
    assert len(SKILLS) >= 20


@pytest.mark.anyio
async def test_skills_scripts_run_on_docker_as_on_in_memory(
    docker_namespace: str, make_provider: MakeProvider
) -> None:
    docker_provider = DockerSandboxProvider(image=IMAGE, namespace=docker_namespace)
    try:
        on_docker = await run_all_in_sandbox(
            docker_provider, SKILLS, jobs=4, timeout=DOCKER_TIMEOUT
        )
    finally:
        await docker_provider.aclose()
    in_memory = await run_all_in_sandbox(make_provider(), SKILLS)
    differences = compare(SKILLS, on_docker, in_memory, reference="Docker")
    assert not differences, "\n".join(
        _explain(name, difference, on_docker[name], in_memory[name])
        for name, difference in differences.items()
    )


def _explain(name: str, difference: str, docker: Outcome, mine: Outcome) -> str:
    return (
        f"{name}: in-memory differs from Docker by {difference}\n"
        f"  docker:    exit {docker.exit_code}, stdout {docker.stdout!r}, stderr {docker.stderr!r}\n"
        f"  in-memory: exit {mine.exit_code}, stdout {mine.stdout!r}, stderr {mine.stderr!r}"
    )
