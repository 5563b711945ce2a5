
"""A pause outlives the processes around it: workers and the server itself."""

from __future__ import annotations

import pytest

import uuid
from datetime import datetime, timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from activities.tools.bookings import all_bookings
from hitl.devserver import FAST_SQLITE, free_port, temporal_binary
from hitl.settings import DATA_CONVERTER
from tests.support.sessions import Agent, assert_well_formed, pending_items, pending_of_kind, record_if_asked, settled
from hitl.worker import build_worker


from workflows.agent import AgentWorkflow


async def test_a_decision_sent_while_no_worker_runs_is_taken_by_the_next_worker(
    env: WorkflowEnvironment, workspace: Path
) -> None:
    task_queue = f"restart-{uuid.uuid4().hex[:8]}"
    async with build_worker(env.client, task_queue, OfflineModel(), workspace):
        session = await Agent(env.client, task_queue, workspace).start("book me a flight to Beijing on 2026-12-24")
        await pending_items(session)

    # No worker now: the person answers anyway, and the server keeps the answer.
    await session.signal("answer", {"answer": "Shanghai", "by": "ana"})

    async with build_worker(env.client, task_queue, OfflineModel(), workspace):
        approval = await pending_of_kind(session, "approval")
    async with build_worker(env.client, task_queue, OfflineModel(), workspace):
        await session.signal("approve", {"call_id": approval["call_id"], "by": "ana"})
        status = await settled(session)
        assert_well_formed(await session.query("transcript"))

    assert "HITL-" in status["last_answer"]
    assert len(all_bookings(workspace)) == 1
    await record_if_asked(env.client, task_queue)


async def test_a_paused_session_survives_a_server_restart_on_its_sqlite_file(tmp_path: Path, workspace: Path) -> None:
    database = tmp_path / "temporal.db"
    task_queue = "server-restart"

    async def server() -> WorkflowEnvironment:
        # A new port each start: the one the first server freed may be taken by then on a busy machine.
        return await WorkflowEnvironment.start_local(
            data_converter=DATA_CONVERTER,
            dev_server_existing_path=temporal_binary(),
            dev_server_database_filename=str(database),
            port=free_port(),
            dev_server_extra_args=FAST_SQLITE,
        )

    first = await server()
    async with build_worker(first.client, task_queue, OfflineModel(), workspace):
        handle = await first.client.start_workflow(
            AgentWorkflow.run, {"message": "please delete notes.txt"}, id="survivor", task_queue=task_queue
        )
        [before] = await pending_items(handle)
    await first.shutdown()

    second = await server()
    try:
        async with build_worker(second.client, task_queue, OfflineModel(), workspace):
            session = second.client.get_workflow_handle("survivor")
            [after] = await pending_items(session)
            # The pause's times are workflow.now() of the task that took judge_calls' result, which a
            # replay can place a task earlier (docs/observability.md, the clock's late delivery: 17 ms
            # once in a suite run); all else is the same, and the times within that task's skew.
            moments = ("requested_at", "deadline")
            assert {k: v for k, v in after.items() if k not in moments} == {k: v for k, v in before.items() if k not in moments}
            for moment in moments:
                assert abs(datetime.fromisoformat(after[moment]) - datetime.fromisoformat(before[moment])) < timedelta(seconds=10)
            await session.signal("approve", {"by": "ana"})
            status = await settled(session)
        await record_if_asked(second.client, task_queue)
    finally:
        await second.shutdown()
    assert status["last_answer"] == "Deleted notes.txt."
    assert not (workspace / "notes.txt").exists()

