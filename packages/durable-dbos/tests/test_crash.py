"""The crash harness: worker processes killed with SIGKILL at every kill point of a durable run,
then started again with the same executor id; the restarted worker resumes the run.

For each point of ``dbos_crash_worker.CRASH_POINTS`` a worker runs the run (two tool calls at
once, one more, then an answer) on its own SQLite thread storage and DBOS database, and kills
itself there; the test sees it die by SIGKILL, starts a worker again without a kill point (the
same executor id, from ``PAI_DURABLE_EXECUTOR``), and that worker attaches to the run DBOS
resumes at launch. Every run must complete, every line must be in the tool's file exactly once,
the thread must hold what an uncrashed run's thread holds, and only the step the worker died in
(and those after it) may run again.

Workers are forked by one server process that imported DBOS once (``import dbos`` costs about two
seconds a process); each is a process of its own, killed for real. One chain also runs as fresh
``python dbos_crash_worker.py`` processes, the way a deployment restarts. The time from each
restart to the first resumed step is printed, not asserted.
"""

from __future__ import annotations

import pytest
from dbos_crash_worker import CRASH_POINTS
from dbos_harness import Chain, ForkServer, check_resumed, fresh_worker, recovery_report, run_chain

FRESH_POINT = "tool:c:after"
"""The kill point also run with fresh processes (not forked)."""


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Chain]:
    root = tmp_path_factory.mktemp("crash")
    server = ForkServer()
    try:
        done = {"uncrashed": run_chain(Chain(None, root / "uncrashed"), server.run)}
        for point in CRASH_POINTS:
            done[point] = run_chain(Chain(point, root / point.replace(":", "-")), server.run)
    finally:
        server.close()
    done[f"{FRESH_POINT} (fresh)"] = run_chain(Chain(FRESH_POINT, root / "fresh"), fresh_worker)
    return done


def test_the_uncrashed_run_completes(chains: dict[str, Chain]) -> None:
    chain = chains["uncrashed"]
    assert chain.first == 0, chain.explain()
    assert chain.result["status"] == "completed"
    assert chain.result["text"] == "done"


@pytest.mark.parametrize("label", [*CRASH_POINTS, f"{FRESH_POINT} (fresh)"])
def test_a_run_killed_there_resumes_to_the_uncrashed_history(
    chains: dict[str, Chain], label: str
) -> None:
    check_resumed(chains[label], chains["uncrashed"])


def test_recovery_time_is_reported(
    chains: dict[str, Chain], capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed, not asserted: from the restarted worker's start (for the fresh process, before
    it imported anything) and from DBOS's launch, to the first step body it ran again."""
    killed = {label: chain for label, chain in chains.items() if chain.point is not None}
    with capsys.disabled():
        print("\nrecovery after SIGKILL (SQLite):\n  " + recovery_report(killed))
