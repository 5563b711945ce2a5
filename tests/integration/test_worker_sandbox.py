"""A worker with the workflow sandbox off (HITL_WORKFLOW_SANDBOX=off) runs sessions as the sandboxed
one does: the same decisions, and histories that replay in the sandbox command for command."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.worker import DEFAULT_TUNING, WorkerTuning, build_worker
from tests.support.session_health import assert_no_failed_workflow_task
from tests.support.sessions import Agent, eventually, pending_items, query
from tests.support.replaying import worker_replayer


def test_the_setting_reads_on_and_off() -> None:
    assert WorkerTuning.from_env({}).sandbox is True
    assert WorkerTuning.from_env({"HITL_WORKFLOW_SANDBOX": "off"}).sandbox is False
    assert "workflow sandbox off" in WorkerTuning.from_env({"HITL_WORKFLOW_SANDBOX": "OFF"}).describe()


async def test_a_session_on_an_unsandboxed_worker_replays_in_the_sandbox(env: WorkflowEnvironment, workspace: Path) -> None:
    task_queue = f"unsandboxed-{uuid.uuid4().hex[:8]}"
    tuning = dataclasses.replace(DEFAULT_TUNING, sandbox=False)
    async with build_worker(env.client, task_queue, OfflineModel(), workspace, tuning=tuning):
        session = await Agent(env.client, task_queue, workspace).start("please delete notes.txt")
        [item] = await pending_items(session)
        await session.execute_update("approve_update", {"call_id": item["call_id"], "by": "ana"})
        status = await eventually(lambda: query(session, "status"), lambda s: s["state"] == "idle")
        assert status["last_answer"] == "Deleted notes.txt." and not (workspace / "notes.txt").exists()
        await session.signal("user_message", {"text": "search for milk"})
        await eventually(lambda: query(session, "status"), lambda s: s["state"] == "idle" and s["turn"] == 2)
        await assert_no_failed_workflow_task(session)
        history = await session.fetch_history()
    replayer = worker_replayer()
    result = await replayer.replay_workflow(WorkflowHistory.from_json(session.id, history.to_json()),
                                            raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
