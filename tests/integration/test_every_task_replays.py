"""Every task replays: sessions on a worker that keeps no session in its cache.

With a cache of 0 each workflow task replays the session's whole history, as it does after
an eviction or on another worker. A session must give the same results that way and never
fail a task: operators alert on failed workflow tasks. The CI runs chosen scenario files
this way too (`HITL_TEST_WORKFLOW_CACHE_SIZE=0`, see .ci/run and tests/conftest.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from tests.support.sessions import Agent, failed_workflow_tasks, pending_items, sdk_query_race
from hitl.worker import WorkerTuning, build_worker

REPLAYING = WorkerTuning(max_cached_workflows=0)
CORPUS = Path(__file__).resolve().parents[1] / "histories"


async def test_a_session_cancelled_then_approved_at_once_closes_without_a_failed_task(
    env: WorkflowEnvironment, workspace: Path
) -> None:
    """`approve` right after `cancel`, back to back as one client sends them: the task that closed
    the session met the approve signal that had arrived meanwhile (UNHANDLED_COMMAND), 2 runs in 3."""
    task_queue = f"hitl-replaying-{uuid.uuid4().hex[:8]}"
    async with build_worker(env.client, task_queue, OfflineModel(), workspace, tuning=REPLAYING):
        agent = Agent(env.client, task_queue, workspace)
        sessions = [await agent.start("please delete notes.txt") for _ in range(3)]
        items = [(await pending_items(session))[0] for session in sessions]
        for session, item in zip(sessions, items):
            await session.signal("cancel", {"reason": "stop"})
            try:
                await session.signal("approve", {"call_id": item["call_id"]})
            except RPCError as error:  # closed already: then nothing can be approved anyway
                assert "already completed" in error.message, error
        summaries = [await session.result() for session in sessions]

    assert [summary.reason for summary in summaries] == ["cancelled: stop"] * len(sessions)
    assert (workspace / "notes.txt").exists(), "an approve after cancel ran the tool"
    assert await failed_workflow_tasks(env.client, f"TaskQueue = '{task_queue}'", cache_zero=True) == []


async def test_the_task_sdk_core_failed_at_cache_zero_is_told_from_a_nondeterminism() -> None:
    """The history of CACHE_ZERO_QUERY_RACE (tests/support/sessions.py), caught in the tier: its
    failed task (event 28) and the retry after it replayed on the build that recorded it with no
    error, so the failure was core's answering a query, not a decision the session made
    differently on replay. Its build is older than the first supported one (workflows/patches.py),
    so it is no longer replayed: it is kept as the failure the check below lets pass."""
    [path] = (CORPUS / "races").glob("query_ran_a_local_activity_at_cache_zero--*.json")
    history = WorkflowHistory.from_json("session-83b262da9d", path.read_text())
    [failed] = [event for event in history.events if event.HasField("workflow_task_failed_event_attributes")]
    message = failed.workflow_task_failed_event_attributes.failure.message

    # What the checks pass: this message, once a later task completed; nothing else.
    assert sdk_query_race(history, failed.event_id, message)
    assert not sdk_query_race(history, failed.event_id, "[TMPRL1100] Nondeterminism error: " + message[:40])
    unretried = WorkflowHistory(history.workflow_id, [e for e in history.events if e.event_id <= failed.event_id + 2])
    assert not sdk_query_race(unretried, failed.event_id, message)
