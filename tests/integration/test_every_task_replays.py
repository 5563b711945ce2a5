"""Every task replays: sessions on a worker that keeps no session in its cache.

With a cache of 0 each workflow task replays the session's whole history, as it does after
an eviction or on another worker. A session must give the same results that way and never
fail a task: operators alert on failed workflow tasks. The CI runs chosen scenario files
this way too (`HITL_TEST_WORKFLOW_CACHE_SIZE=0`, see .ci/run and tests/conftest.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from tests.support.replaying import worker_replayer
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


async def test_the_task_sdk_core_failed_at_cache_zero_replays_here() -> None:
    """The history of CACHE_ZERO_QUERY_RACE (tests/support/sessions.py), caught in the tier: its
    failed task (event 28) and the retry after it replay on this workflow with no error, so the
    failure was core's answering a query, not a decision the session made differently on replay."""
    [path] = (CORPUS / "races").glob("query_ran_a_local_activity_at_cache_zero--*.json")
    history = WorkflowHistory.from_json("session-83b262da9d", path.read_text())
    [failed] = [event for event in history.events if event.HasField("workflow_task_failed_event_attributes")]
    message = failed.workflow_task_failed_event_attributes.failure.message
    await worker_replayer().replay_workflow(history)

    # What the checks pass: this message, once a later task completed; nothing else.
    assert sdk_query_race(history, failed.event_id, message)
    assert not sdk_query_race(history, failed.event_id, "[TMPRL1100] Nondeterminism error: " + message[:40])
    unretried = WorkflowHistory(history.workflow_id, [e for e in history.events if e.event_id <= failed.event_id + 2])
    assert not sdk_query_race(unretried, failed.event_id, message)


async def test_a_hand_over_decided_where_a_local_activitys_result_came_late_fails_its_replay() -> None:
    """A history whose replay fails, kept as the evidence of why runs since
    `history-read-as-of-local-activity-start` read the history as of a local activity's start.

    Caught once in 2,400 sessions of test_handover_signals_under_load.py beside two CPU hogs
    (cut here before the signals that then made the server force-close a task, which evicted the
    run and replayed it). `judge_calls`' marker (event 20) is recorded in the completion of the
    task started at 18, but the workflow code was given the result in the next task (started at
    22, with no new event before it: sdk-core forces that task when it answers a query while a
    local activity's result waits). Live, the code after the result saw a history of 22 events,
    past this run's budget of 20, and began its hand-over, waiting for the notification it
    scheduled (26). A replay gives the result in the marker's task, at 18 events: no hand-over,
    so it waits for people with a timer, where the run had scheduled that notification. Runs since
    the patch decide on 18 events in both (tests/unit/test_history_reading.py); a run recorded
    before it, like this one, replays the old way and still fails."""
    [path] = (CORPUS / "races").glob("hand_over_decided_in_a_local_activitys_late_task--*.json")
    history = WorkflowHistory.from_json("session-ee9539b9c8", path.read_text())
    kinds = {event.event_id: EventType.Name(event.event_type).removeprefix("EVENT_TYPE_") for event in history.events}
    assert [kinds[n] for n in range(18, 23)] == ["WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED",
                                                "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED"]
    assert kinds[26] == "ACTIVITY_TASK_SCHEDULED" and kinds[36] == "TIMER_STARTED"
    with pytest.raises(Exception, match=r"Timer machine does not handle this event: HistoryEvent\(id: 26, ActivityTaskScheduled\)"):
        await worker_replayer().replay_workflow(history)
