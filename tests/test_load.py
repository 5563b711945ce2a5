"""A thousand paused sessions on one worker (bench/load.py reports the numbers; 10,000 there)."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from bench.load import run_load, start_worker

SESSIONS = 1000


async def test_a_thousand_paused_sessions_are_found_and_one_resumes(env: WorkflowEnvironment, tmp_path: Path) -> None:
    task_queue = f"load-{uuid.uuid4().hex[:6]}"
    worker = start_worker(env.client.service_client.config.target_host, task_queue, tmp_path / "workspace", tmp_path / "worker.log")
    try:
        report = await run_load(env.client, worker.pid, task_queue, SESSIONS, task_queue, tmp_path / "workspace")
    finally:
        worker.terminate()
        worker.wait()
    print(f"\nload: {report.lines()}".replace("\n", "\n  "))
    assert report.found == SESSIONS, "every paused session is found with its pending call"
    assert report.worker_rss_mb > 0
