"""`python worker.py --check`, the container's health check, answers for this worker process
(issue 26: it trusted the server's list of pollers, which keeps a stopped worker for a while, and
answered 0 seconds after the only worker had stopped)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from tests.support.worker_processes import start_worker
from tests.support.sessions import eventually
from tests.support.stack import Ran, nobody_listens, run_product


async def health_check(address: str, task_queue: str, heartbeat: Path) -> Ran:
    """The check as compose runs it: in the worker's container, with the worker's settings."""
    return await run_product("worker.py", "--check", TEMPORAL_ADDRESS=address, HITL_TASK_QUEUE=task_queue,
                             HITL_WORKER_HEARTBEAT=str(heartbeat))


async def test_the_health_check_says_a_worker_stopped_or_killed_is_not_polling(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = env.client.service_client.config.target_host
    task_queue, heartbeat = f"health-{uuid.uuid4().hex[:8]}", tmp_path / "worker.alive"
    (tmp_path / "workspace").mkdir()

    def worker(log: str):  # type: ignore[no-untyped-def]
        return start_worker(address, task_queue, tmp_path / "workspace", tmp_path / log,
                            {"HITL_WORKER_HEARTBEAT": str(heartbeat)})

    first = worker("first.log")
    try:
        alive = await eventually(lambda: health_check(address, task_queue, heartbeat), lambda ran: ran.returncode == 0)
        first.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(first.wait, 60) == 0
        stopped = await health_check(address, task_queue, heartbeat)
        assert stopped.returncode == 1 and "not polling: no heartbeat" in stopped.stdout, stopped
        assert f"pid {first.pid}" in alive.stdout and f"task queue {task_queue}" in alive.stdout, alive
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()

    second = worker("second.log")
    try:
        await eventually(lambda: health_check(address, task_queue, heartbeat), lambda ran: ran.returncode == 0)
        second.send_signal(signal.SIGKILL)
        second.wait()
        killed = await eventually(lambda: health_check(address, task_queue, heartbeat), lambda ran: ran.returncode == 1,
                                  timeout=30)  # a heartbeat is stale after 10 s
        assert "s old (the worker was killed, or hangs)" in killed.stdout, killed
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()


async def test_the_health_check_without_its_file_says_what_to_set() -> None:
    ran = await run_product("worker.py", "--check", TEMPORAL_ADDRESS=nobody_listens())
    assert ran.returncode == 1 and ran.stdout.startswith("worker: HITL_WORKER_HEARTBEAT is not set: set it"), ran
