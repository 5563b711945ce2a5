"""A thousand paused sessions on one worker: every one parks, is found and resumes, in time.

bench/load.py does the work and reports the numbers (10,000 sessions there);
this test holds the report to what it claims: no session short in any phase,
each phase within its deadline, the inbox's first page under a second.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from bench.load import Deadlines, run_load, start_worker
from hitl.client.inbox import LIMIT

SESSIONS = 1000
# Measured here on 2 shared cores: parked in 32 s, found in 3 s, one resume in 36 ms.
# The deadlines leave room for a busy CI machine, not for a session that is lost.
DEADLINES = Deadlines(park_all=240, find_all=120, resume_each=60)
INBOX_SECONDS = 1.0  # the bound for 10,000 sessions, held here at 1,000 on a busy machine


async def test_a_thousand_paused_sessions_all_park_are_found_and_resume(env: WorkflowEnvironment, tmp_path: Path) -> None:
    task_queue = f"load-{uuid.uuid4().hex[:6]}"
    workspace = tmp_path / "workspace"
    worker = start_worker(env.client.service_client.config.target_host, task_queue, workspace, tmp_path / "worker.log")
    try:
        report = await run_load(env.client, worker.pid, task_queue, SESSIONS, task_queue, workspace, DEADLINES)
    finally:
        worker.terminate()
        worker.wait()
    print(f"\nload: {report.lines()}".replace("\n", "\n  "))
    assert report.parked == SESSIONS, f"{SESSIONS - report.parked} sessions did not park within {DEADLINES.park_all} s"
    assert report.slowest_park_seconds <= DEADLINES.park_all
    assert report.found == SESSIONS, f"{SESSIONS - report.found} parked sessions were not found with their approval"
    assert report.find_all_seconds <= DEADLINES.find_all
    assert report.inbox_found == SESSIONS, f"the whole inbox (one visibility list) missed {SESSIONS - report.inbox_found} sessions"
    assert report.inbox_page_items == LIMIT, "the inbox's first page is full"
    assert report.inbox_page_seconds < INBOX_SECONDS, f"the inbox took {report.inbox_page_seconds:.2f} s with {SESSIONS} waiting"
    assert report.resumed == SESSIONS, f"{SESSIONS - report.resumed} sessions did not resume within {DEADLINES.resume_each} s"
    assert report.slowest_resume_seconds <= DEADLINES.resume_each
    assert 0 < report.worker_rss_mb < 2048, "the worker's memory was read, and stays bounded"
