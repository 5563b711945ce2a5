"""A deploy with worker versioning: sessions paused on build v1 continue on v2
(auto-upgrade), replaying their history on the new build."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.testing import WorkflowEnvironment

from tests.support.worker_processes import start_worker
from tests.support.worker_processes import until_gone, until_polling
from tests.support.sessions import pending_items, settled
from tests.support.stack import temporal_cli
from workflows.agent import AgentWorkflow


async def set_current_version(address: str, deployment: str, build_id: str) -> None:
    """The version registers when its first worker polls: retry until the server knows it."""
    for _ in range(100):
        done = temporal_cli("worker", "deployment", "set-current-version", "--address", address,
                            "--deployment-name", deployment, "--build-id", build_id, "--yes")
        if done.returncode == 0:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"set-current-version {build_id}: {done.stderr}")


async def test_a_session_paused_on_one_build_continues_on_the_next(env: WorkflowEnvironment, tmp_path: Path) -> None:
    address = env.client.service_client.config.target_host
    task_queue = f"deploy-{uuid.uuid4().hex[:8]}"
    deployment = f"hitl-{task_queue}"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("remember the milk\n")

    def worker(build_id: str):
        return start_worker(address, task_queue, workspace, tmp_path / f"{build_id}.log", {
            "HITL_DEPLOYMENT_NAME": deployment, "HITL_BUILD_ID": build_id,
            "HITL_WORKER_IDENTITY": f"{build_id}-{task_queue}",
        })

    first = worker("v1")
    second = None
    try:
        await until_polling(env.client, task_queue, f"v1-{task_queue}")
        await set_current_version(address, deployment, "v1")
        session = await env.client.start_workflow(
            AgentWorkflow.run, {"message": "please delete notes.txt"}, id=task_queue, task_queue=task_queue
        )
        await pending_items(session)

        # The deploy: v2 comes up, becomes current, v1 stops gracefully.
        second = worker("v2")
        await until_polling(env.client, task_queue, f"v2-{task_queue}")
        await set_current_version(address, deployment, "v2")
        first.send_signal(signal.SIGTERM)
        first.wait()

        await session.signal("approve", {"by": "ana"})
        await until_gone(workspace / "notes.txt")
        await settled(session)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait()

    completed = [e.workflow_task_completed_event_attributes for e in (await session.fetch_history()).events
                 if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]
    builds = [task.deployment_version.build_id for task in completed]
    assert builds[0] == "v1" and builds[-1] == "v2", builds
    assert {task.versioning_behavior for task in completed} == {VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE}
