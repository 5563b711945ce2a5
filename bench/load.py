"""Many paused sessions on one worker: start rate, worker memory, finding them, resuming one.

    python -m bench.load --sessions 10000

starts its own dev server (file-backed, the demo's settings) and one
`python worker.py` process, then parks that many sessions on an approval.
tests/test_load.py runs the same code with 1,000 sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable

from temporalio.client import Client
from temporalio.service import RPCError

from workflows.agent import AgentWorkflow

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 64


@dataclass
class LoadReport:
    sessions: int
    start_seconds: float
    starts_per_second: float
    all_paused_seconds: float
    worker_rss_mb: float
    find_all_seconds: float
    found: int
    resume_seconds: float

    def lines(self) -> str:
        return "\n".join(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}"
                         for key, value in asdict(self).items())


def start_worker(
    address: str, task_queue: str, workspace: Path, log: Path, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "HITL_TASK_QUEUE": task_queue, "HITL_WORKSPACE": str(workspace),
           **(extra_env or {})}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "worker.py"], cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bounded(items: list[Any], action: Callable[[Any], Awaitable[Any]]) -> list[Any]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(item: Any) -> Any:
        async with gate:
            return await action(item)

    return await asyncio.gather(*(one(item) for item in items))


async def pending_of(client: Client, session_id: str) -> list[dict[str, Any]]:
    """A query can time out while the worker is saturated; that is load, not an answer."""
    handle = client.get_workflow_handle(session_id)
    while True:
        try:
            return await handle.query("pending", rpc_timeout=timedelta(seconds=30))
        except RPCError:
            await asyncio.sleep(1)


async def until_all_paused(workspace: Path, ids: list[str]) -> None:
    """Each pause notifies (notifications.jsonl), as people would learn of it: no polling."""
    waiting = set(ids)
    notifications = workspace / "notifications.jsonl"
    seen = 0
    while waiting:
        await asyncio.sleep(0.5)
        if notifications.exists():
            lines = notifications.read_text().splitlines()
            for line in lines[seen:]:
                waiting.discard(json.loads(line)["session_id"])
            seen = len(lines)


async def run_load(
    client: Client, worker_pid: int, task_queue: str, sessions: int, prefix: str, workspace: Path
) -> LoadReport:
    ids = [f"{prefix}-{n:05d}" for n in range(sessions)]
    began = time.perf_counter()
    await bounded(ids, lambda sid: client.start_workflow(
        AgentWorkflow.run, {"message": "please delete notes.txt"}, id=sid, task_queue=task_queue))
    started = time.perf_counter() - began
    await until_all_paused(workspace, ids)
    all_paused = time.perf_counter() - began

    # Finding them: what an inbox does — list the running sessions, then ask each what waits.
    found_at = time.perf_counter()
    running = [w.id async for w in client.list_workflows(f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'")]
    pending = await bounded(running, lambda sid: pending_of(client, sid))
    found = sum(1 for items in pending if items)
    find_all = time.perf_counter() - found_at

    chosen = client.get_workflow_handle(random.choice(ids))
    resumed_at = time.perf_counter()
    await chosen.execute_update("reject_update", {"reason": "load test"})
    while (await chosen.query("status"))["state"] != "idle":
        await asyncio.sleep(0.005)
    resume = time.perf_counter() - resumed_at
    return LoadReport(sessions, started, sessions / started, all_paused, rss_mb(worker_pid), find_all, found, resume)


async def main() -> None:
    from devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        server = start_dev_server(Path(folder) / "temporal.db", port=port, ui_port=free_port())
        workspace = Path(folder) / "workspace"
        worker = start_worker(f"127.0.0.1:{port}", "load", workspace, Path(folder) / "worker.log")
        try:
            client = await connect_when_ready(f"127.0.0.1:{port}")
            report = await run_load(client, worker.pid, "load", args.sessions, "load", workspace)
        finally:
            worker.terminate()
            worker.wait()
            stop_dev_server(server)
    print(report.lines())
    print(json.dumps(asdict(report)))


if __name__ == "__main__":
    asyncio.run(main())
    from exit_cleanly import exit_now

    exit_now(0)
