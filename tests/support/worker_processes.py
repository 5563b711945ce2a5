"""`python worker.py` processes for the tests and the benchmarks: started on a task queue, waited
for until they poll, and the approval they take over when another worker stops."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from temporalio.client import Client

from hitl.worker import pollers
from workflows.agent import AgentWorkflow
from workflows.contract import APPROVE, PENDING

ROOT = Path(__file__).resolve().parents[2]


def start_worker(
    address: str, task_queue: str, workspace: Path, log: Path, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "HITL_TASK_QUEUE": task_queue, "HITL_WORKSPACE": str(workspace),
           **(extra_env or {})}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "worker.py"], cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def until_polling(client: Client, task_queue: str, identity: str, timeout: float = 60,
                        process: subprocess.Popen[bytes] | None = None, log: Path | None = None) -> None:
    """Wait until the worker named `identity` polls; given its process and log, a worker that
    exited instead fails at once, with the last lines it printed."""
    deadline = time.monotonic() + timeout
    while identity not in await pollers(client, task_queue):
        if process is not None and process.poll() is not None:
            said = log.read_text(errors="replace").strip().splitlines()[-10:] if log and log.exists() else []
            raise RuntimeError(f"worker {identity} exited ({process.returncode}) before polling {task_queue}: "
                               + "\n".join(said))
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {identity} did not poll {task_queue} within {timeout} s")
        await asyncio.sleep(0.1)


async def until_gone(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} still exists {timeout} s after the approval")
        await asyncio.sleep(0.005)


async def approval_wait(
    client: Client, address: str, folder: Path, stop: str, sticky_timeout: float | None = None
) -> tuple[float, str]:
    """Seconds from an approval to the approved delete having run, and the session's id.

    stop: "none" (A stays up), "graceful" (SIGTERM, waited for) or "kill" (SIGKILL).
    """
    task_queue = f"sticky-{uuid.uuid4().hex[:8]}"
    workspace = folder / task_queue
    workspace.mkdir(parents=True)
    target = workspace / "notes.txt"
    target.write_text("remember the milk\n")
    extra = {} if sticky_timeout is None else {"HITL_STICKY_TIMEOUT_SECONDS": str(sticky_timeout)}

    def log(name: str) -> Path:
        return folder / f"{task_queue}-{name}.log"

    def worker(name: str) -> subprocess.Popen[bytes]:
        env = {**extra, "HITL_WORKER_IDENTITY": f"{name}-{task_queue}", "HITL_GRACEFUL_SHUTDOWN_SECONDS": "5"}
        return start_worker(address, task_queue, workspace, log(name), env)

    first = worker("a")
    second = None
    try:
        await until_polling(client, task_queue, f"a-{task_queue}", process=first, log=log("a"))
        session = await client.start_workflow(
            AgentWorkflow.run, {"message": "please delete notes.txt"}, id=task_queue, task_queue=task_queue
        )
        while not await session.query(PENDING.name):
            await asyncio.sleep(0.05)
        second = worker("b")
        await until_polling(client, task_queue, f"b-{task_queue}", process=second, log=log("b"))
        if stop != "none":
            first.send_signal(signal.SIGKILL if stop == "kill" else signal.SIGTERM)
            first.wait()
        began = time.perf_counter()
        await session.signal(APPROVE.signal.name, {"by": "bench"})
        await until_gone(target)
        return time.perf_counter() - began, session.id
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait()
