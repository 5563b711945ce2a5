
"""The same worker scales out: processes on one task queue share sessions, and
when one dies the others take over its sessions within about a second."""

from __future__ import annotations

import pytest

import asyncio
import signal
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.workspace_identity import without_workspace
from bench.load import start_worker
from bench.sticky import approval_wait, until_polling
from tests.conftest import pending_items, settled
from tests.stack import Ran, run_product

pytestmark = pytest.mark.system  # the product's own processes, or a server started, killed or proxied here
from workflows.agent import AgentWorkflow

SESSIONS = 10


async def identities(handle: WorkflowHandle, kind: EventType.ValueType) -> list[str]:
    """Which worker completed each workflow task (or started each activity) of a session, in order
    (its configured identity, without the workspace it names)."""
    history = await handle.fetch_history()
    if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        return [without_workspace(e.workflow_task_completed_event_attributes.identity)
                for e in history.events if e.event_type == kind]
    return [without_workspace(e.activity_task_started_event_attributes.identity) for e in history.events if e.event_type == kind]


async def health_check(address: str, task_queue: str, identity: str) -> Ran:
    return await run_product("worker.py", "--check", TEMPORAL_ADDRESS=address, HITL_TASK_QUEUE=task_queue,
                             HITL_WORKER_IDENTITY=identity)


async def test_two_workers_share_sessions_and_one_takes_all_of_them_when_the_other_is_killed(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    task_queue = f"scale-{uuid.uuid4().hex[:8]}"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for n in range(SESSIONS):
        (workspace / f"note-{n}.txt").write_text(f"note {n}\n")
    names = {name: f"{name}-{task_queue}" for name in ("first", "second")}
    workers = {
        name: start_worker(env.client.service_client.config.target_host, task_queue, workspace,
                           tmp_path / f"{name}.log", {"HITL_WORKER_IDENTITY": identity})
        for name, identity in names.items()
    }
    try:
        for identity in names.values():
            await until_polling(env.client, task_queue, identity)
        sessions = [
            await env.client.start_workflow(AgentWorkflow.run, {"message": f"please delete note-{n}.txt"},
                                            id=f"{task_queue}-{n}", task_queue=task_queue)
            for n in range(SESSIONS)
        ]
        await asyncio.gather(*(pending_items(session) for session in sessions))
        handled_by = [set(await identities(s, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)) for s in sessions]
        assert set().union(*handled_by) == set(names.values()), f"sessions landed on one worker only: {handled_by}"

        # The container health check: is this worker polling its task queue?
        address = env.client.service_client.config.target_host
        assert (await health_check(address, task_queue, names["second"])).returncode == 0
        assert (await health_check(address, f"{task_queue}-unserved", names["second"])).returncode == 1

        workers["first"].send_signal(signal.SIGKILL)
        workers["first"].wait()
        for session in sessions:
            await session.signal("approve", {"by": "ana"})
        await asyncio.gather(*(settled(session) for session in sessions))

        assert not list(workspace.glob("note-*.txt")), "every approved delete ran"
        for session in sessions:
            tools_run_by = await identities(session, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)
            last_task_by = await identities(session, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
            assert tools_run_by[-1] == last_task_by[-1] == names["second"]
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.terminate()
                process.wait()


async def test_an_approval_after_a_worker_crash_runs_within_seconds(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """A SIGKILLed worker's sessions wait out its sticky queue's timeout (the SDK's
    10 s by default; worker.py's 1 s) before another worker takes them."""
    address = env.client.service_client.config.target_host
    after_crash = await approval_wait(env.client, address, tmp_path, "kill")
    after_graceful_stop = await approval_wait(env.client, address, tmp_path, "graceful")
    print(f"\nsticky: approval after a crash {after_crash:.3f} s, after a graceful stop {after_graceful_stop:.3f} s")
    assert after_crash < 3.0
    assert after_graceful_stop < 1.0
