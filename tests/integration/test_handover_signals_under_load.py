"""Under load, no signal sent as a session hands over is lost: the race docs/long-sessions.md
describes, sought live.

Each attempt starts a session that hands over every 20 events, waits for its approval request and
sends four `reject`s with a 1 MB `call_id`, which the session refuses and lists in
`status.ignored_signals` (and carries to its next run). Sent back to back they overflow the
server's buffer of events for a task in flight, so it fails that task and the session hands over in
the middle of them. A CPU hog runs beside it.
`HITL_HANDOVER_ATTEMPTS=60 ./test.sh tests/integration/test_handover_signals_under_load.py`: before
runs handed over in a timer task of their own, 7 of 60 sessions lost signals (4 min 52 s, most of
it waiting for the lost); since, 0 of 60 (26 s). The default, 12 attempts, keeps the suite short
and caught the old code more often than not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from tests.support import bad_inputs
from tests.support.session_health import runs_of, wait_for_status
from tests.support.sessions import pending_items, running_agent

ATTEMPTS = int(os.environ.get("HITL_HANDOVER_ATTEMPTS", "12"))
SIGNALS = 4
# Busy for at most ten minutes, should this test be killed before it stops the hog itself.
HOG = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"


async def test_signals_sent_as_a_session_hands_over_all_reach_it(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    lost: list[str] = []
    try:
        async for agent in running_agent(env.client, workspace):
            for _ in range(ATTEMPTS):
                session = await agent.start(bad_inputs.DELETE, continue_as_new_after_events=20)
                await pending_items(session)
                for _ in range(SIGNALS):
                    await session.signal("reject", {"call_id": "c" * bad_inputs.MB})
                try:
                    await wait_for_status(session, lambda s: len(s["ignored_signals"]) >= SIGNALS)
                except AssertionError as error:  # lost signals, or a failed task: kept to be replayed
                    kept = await keep_histories(env, session.id, session.first_execution_run_id, tmp_path)
                    lost.append(f"{session.id} ({str(error)[:800]}; every run's history in {kept})")
                await session.terminate()
    finally:
        hog.kill()
        hog.wait()
    assert not lost, f"{len(lost)} of {ATTEMPTS} sessions lost signals sent as they handed over, or failed a task: {lost}"


async def keep_histories(env: WorkflowEnvironment, session_id: str, first_run: str | None, folder: Path) -> Path:
    """Every run's history of a session that went wrong, one JSON file a run, as `WorkflowHistory.from_json` reads."""
    kept = folder / session_id
    kept.mkdir(parents=True, exist_ok=True)
    for history in await runs_of(env.client, session_id, first_run):
        (kept / f"{session_id}--{history.run_id}.json").write_text(history.to_json())
    return kept
