
"""A pause outlives the processes around it: workers and the server itself."""

from __future__ import annotations

import signal
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from activities.openai_backend import OpenAIBackend
from activities.tools.bookings import all_bookings
from hitl.devserver import FAST_SQLITE, free_port, temporal_binary
from hitl.settings import DATA_CONVERTER
from hitl.worker import build_worker
from tests.integration.test_sub_agents import TREE, DelegatingModel, root_pending
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.mcp_servers import tool_results, worker_process
from tests.support.sessions import (
    SECRET_KEY, Agent, assert_well_formed, failed_workflow_tasks, pending_items, pending_of_kind, query,
    record_if_asked, settled,
)
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
    first = await server_on(database)
    async with build_worker(first.client, task_queue, OfflineModel(), workspace):
        handle = await first.client.start_workflow(
            AgentWorkflow.run, {"message": "please delete notes.txt"}, id="survivor", task_queue=task_queue
        )
        [before] = await pending_items(handle)
    await first.shutdown()

    second = await server_on(database)
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



@pytest.mark.parametrize("decided_while_no_worker_runs", [False, True])
async def test_a_tree_of_sessions_outlives_a_sigkilled_worker_and_is_decided_at_the_root(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path, decided_while_no_worker_runs: bool
) -> None:
    """Given a root that delegates to the researcher, which delegates to the coder, whose delete
    waits for a person: the worker process is SIGKILLed while it waits, another worker takes the
    tree over, the pause is still in the root's pending (or the decision was sent to the root while
    no worker ran), the decision sent to the root reaches the coder, the delete runs once, and each
    parent reads its child's answer."""
    task_queue = f"tree-kill-{uuid.uuid4().hex[:8]}"
    with FakeOpenAI() as fake:  # one model call at a time: each parent waits for its child
        fake.script(
            tool_calls(("d1", "delegate__researcher", {"task": "have notes.txt deleted"})),
            tool_calls(("d2", "delegate__coder", {"task": "delete notes.txt"})),
            tool_calls(("c1", "delete_file", {"path": "notes.txt"})),
            text("the coder deleted notes.txt"),
            text("the researcher had notes.txt deleted"),
            text("done: notes.txt is gone"),
        )
        address = env.client.service_client.config.target_host
        with worker_process(address, task_queue, workspace, {}, fake, tmp_path) as worker:
            root = await Agent(env.client, task_queue, workspace).start("tidy up", agents=TREE, by="ana")
            [before] = await root_pending(root, {("researcher", "coder")})
            assert (before["tool"], before["session_id"]) == ("delete_file", f"{root.id}/researcher/1/coder/1")
            worker.send_signal(signal.SIGKILL)
            assert worker.wait() == -signal.SIGKILL
        if decided_while_no_worker_runs:  # the server keeps it; the next worker's root forwards it
            await root.signal("approve", {"call_id": before["call_id"], "by": "ana"})

        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async with build_worker(env.client, task_queue, backend, workspace):
            if not decided_while_no_worker_runs:
                [after] = await root_pending(root, {("researcher", "coder")})  # the new worker's replay
                assert (after["call_id"], after["tool"]) == (before["call_id"], "delete_file")
                await root.signal("approve", {"call_id": after["call_id"], "by": "ana"})
            status = await settled(root)
            coder = env.client.get_workflow_handle(before["session_id"])
            assert [event["event"] for event in await query(coder, "audit")].count("approved") == 1
            coder_results = [m["content"] for m in await query(coder, "transcript") if m["role"] == "tool"]
            assert coder_results == ["Deleted notes.txt."], coder_results
    assert status["last_answer"] == "done: notes.txt is gone"
    assert not (workspace / "notes.txt").exists()
    assert tool_results(fake)["d1"] == "the researcher had notes.txt deleted"
    assert tool_results(fake, -2)["d2"] == "the coder deleted notes.txt"
    assert await failed_workflow_tasks(env.client, f"TaskQueue = '{task_queue}'") == []


async def test_a_tree_of_sessions_paused_at_its_grandchild_survives_a_server_restart(tmp_path: Path, workspace: Path) -> None:
    """The same tree, on a server that stops while the coder's delete waits: the server started
    again on its file lists the pause at the root, which decides it, and the answer climbs back."""
    database = tmp_path / "temporal.db"
    task_queue = "tree-server-restart"
    first = await server_on(database)
    async with build_worker(first.client, task_queue, DelegatingModel(), workspace):
        root = await Agent(first.client, task_queue, workspace).start(
            "delegate researcher: delegate coder: delete notes.txt", agents=TREE, by="ana", session_id="tree-survivor")
        [before] = await root_pending(root, {("researcher", "coder")})
    await first.shutdown()

    second = await server_on(database)
    try:
        async with build_worker(second.client, task_queue, DelegatingModel(), workspace):
            root = second.client.get_workflow_handle("tree-survivor")
            [after] = await root_pending(root, {("researcher", "coder")})
            assert (after["call_id"], after["session_id"]) == (before["call_id"], "tree-survivor/researcher/1/coder/1")
            await root.signal("approve", {"call_id": after["call_id"], "by": "ana"})
            status = await settled(root)
            coder = second.client.get_workflow_handle(after["session_id"])
            assert [event["event"] for event in await query(coder, "audit")].count("approved") == 1
            assert await failed_workflow_tasks(second.client, f"TaskQueue = '{task_queue}'") == []
    finally:
        await second.shutdown()
    assert status["last_answer"] == "delegate__researcher: delegate__coder: Deleted notes.txt.", status
    assert not (workspace / "notes.txt").exists()


async def server_on(database: Path) -> WorkflowEnvironment:
    """A dev server keeping its state in `database`, so the next one started on it finds it."""
    # A new port each start: the one the first server freed may be taken by then on a busy machine.
    return await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=temporal_binary(),
        dev_server_database_filename=str(database),
        port=free_port(),
        dev_server_extra_args=FAST_SQLITE,
    )
