"""A long session continues as new between turns and keeps what it knows."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.client.updates import execute_update_retrying
from hitl.devserver import free_port
from hitl.worker import build_worker
from tests.support.patient_updates import without_patience
from tests.support.sessions import Agent, assert_well_formed, eventually, pending_items, query, settled
from workflows.contract import APPROVE


async def test_a_session_continues_as_new_and_keeps_transcript_audit_and_memory(agent: Agent) -> None:
    for name in ("a.txt", "b.txt"):
        (agent.workspace / name).write_text(name)
    session = await agent.start("please delete a.txt", continue_as_new_after_events=20, by="ana")
    first_run = (await session.describe()).run_id
    await pending_items(session)
    await session.execute_update("approve_update", {"by": "bo", "remember": {"scope": "tool", "for_seconds": 3600}})

    latest = agent.client.get_workflow_handle(session.id)
    await eventually(lambda: latest.describe(), lambda d: d.run_id != first_run)
    status = await settled(latest)
    assert status["turn"] == 1 and status["last_answer"] == "Deleted a.txt."

    await latest.execute_update("user_message_update", {"text": "please delete b.txt", "by": "ana"})
    status = await eventually(lambda: query(latest, "status"), lambda s: s["turn"] == 2 and s["state"] == "idle")
    assert status["last_answer"] == "Deleted b.txt." and not (agent.workspace / "b.txt").exists()

    transcript = await query(latest, "transcript")
    assert [m["content"] for m in transcript if m["role"] == "user"] == ["please delete a.txt", "please delete b.txt"]
    assert_well_formed(transcript)
    events = [e["event"] for e in await query(latest, "audit")]
    assert events == ["requested", "approved", "auto_approved"], "the remembered approval crossed the new run"


async def test_a_decision_is_taken_while_a_hand_over_waits_for_its_notifications(
        env: WorkflowEnvironment, workspace: Path) -> None:
    """A run hands over once its notifications are done, and a webhook that is down keeps one
    going for about fifteen seconds (five attempts with backoff). Meanwhile every Update was refused
    as `busy`; the clients' retries gave up after three seconds, so an approval through the API
    answered 503 "nothing was applied". Decisions are taken there as they always were."""
    nobody_listens = f"http://127.0.0.1:{free_port()}/"
    task_queue = f"handover-notify-{uuid.uuid4().hex[:8]}"
    async with build_worker(env.client, task_queue, OfflineModel(), workspace, notify_url=nobody_listens):
        session = await Agent(env.client, task_queue, workspace).start("please delete notes.txt",
                                                                      continue_as_new_after_events=20)
        [item] = await pending_items(session)
        # Any new event wakes the waiting run, which finds its history long and starts handing over.
        await session.signal("reject", {"call_id": "nobody-asked"})
        await eventually(lambda: query(session, "status"), lambda s: s["ignored_signals"])
        as_a_client_sends_it = without_patience(env.client).get_workflow_handle(session.id)  # the product's retries only
        accepted = await execute_update_retrying(as_a_client_sends_it, APPROVE.update, {"call_id": item["call_id"], "by": "ana"})
        assert accepted["outcome"] == "approved", accepted
        latest = env.client.get_workflow_handle(session.id)
        status = await eventually(lambda: query(latest, "status"), lambda s: s["state"] == "idle", timeout=60)
        assert status["last_answer"] == "Deleted notes.txt." and not (workspace / "notes.txt").exists()
        assert (await latest.describe()).run_id != session.first_execution_run_id, "it never handed over: tests nothing"
