"""How long a person waits after approving, when the worker that held the session is gone.

    python -m bench.sticky --rounds 3

A worker caches each session it runs and the server sends that session's next
task to the worker's own sticky queue. After a graceful stop the worker tells
the server, which reroutes at once; after a SIGKILL the server waits for the
sticky queue's schedule-to-start timeout (the SDK's default: 10 s) before any
other worker may take the task. worker.py sets it from HITL_STICKY_TIMEOUT_SECONDS
(1 s by default). For each case this starts its own dev server, a worker A that
takes a session to an approval pause, a worker B, stops A, approves, and times
the approval until the tool has run (the file is gone). It reports the median
of each case and the crash/graceful ratio; `--sticky-timeout 10` shows the SDK
default. tests/system/test_scale_out.py runs one round of each against the test server.

    python -m bench.sticky --burst 1000 --sticky-timeout 1

measures the cost instead: how many workflow tasks of a burst of sessions on
one saturated worker waited past the timeout and were replayed elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.support.load import bounded, run_load
from tests.support.worker_processes import approval_wait, start_worker
from hitl.worker import WorkerTuning


@dataclass
class StickyReport:
    sticky_timeout_seconds: float
    rounds: int
    live_worker_seconds: float
    after_graceful_stop_seconds: float
    after_sigkill_seconds: float

    @property
    def crash_over_graceful(self) -> float:
        return self.after_sigkill_seconds / self.after_graceful_stop_seconds

    def lines(self) -> str:
        figures = {**asdict(self), "crash_over_graceful": self.crash_over_graceful}
        return "\n".join(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}"
                         for key, value in figures.items())


async def measure(
    client: Client, address: str, folder: Path, rounds: int, sticky_timeout: float | None = None
) -> StickyReport:
    cases = {}
    for stop in ("none", "graceful", "kill"):
        cases[stop] = statistics.median(
            [(await approval_wait(client, address, folder, stop, sticky_timeout))[0] for _ in range(rounds)]
        )
    return StickyReport(
        sticky_timeout if sticky_timeout is not None else WorkerTuning.sticky_timeout_seconds, rounds,
        cases["none"], cases["graceful"], cases["kill"],
    )


async def burst_timeouts(client: Client, address: str, folder: Path, sessions: int,
                         sticky_timeout: float | None = None) -> tuple[int, int]:
    """The other side of a short sticky timeout: park `sessions` at once on one worker
    (bench.load) and count workflow tasks that waited past it (WorkflowTaskTimedOut).
    Returns (timed-out tasks, sessions they happened in)."""
    task_queue = f"burst-{uuid.uuid4().hex[:8]}"
    workspace = folder / task_queue
    extra = {} if sticky_timeout is None else {"HITL_STICKY_TIMEOUT_SECONDS": str(sticky_timeout)}
    process = start_worker(address, task_queue, workspace, folder / f"{task_queue}.log", extra)
    try:
        await run_load(client, process.pid, task_queue, sessions, task_queue, workspace)
    finally:
        process.terminate()
        process.wait()
    ids = [execution.id async for execution in client.list_workflows(f"TaskQueue = '{task_queue}'")]

    async def timed_out(session_id: str) -> int:
        history = await client.get_workflow_handle(session_id).fetch_history()
        return sum(1 for event in history.events if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)

    counts = await bounded(ids, timed_out)
    return sum(counts), sum(1 for count in counts if count)


async def main() -> None:
    from bench.own_server import own_dev_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sticky-timeout", type=float, help="HITL_STICKY_TIMEOUT_SECONDS for the workers")
    parser.add_argument("--burst", type=int, metavar="SESSIONS",
                        help="instead: park this many sessions at once and count tasks that outwaited the timeout")
    args = parser.parse_args()
    async with own_dev_server() as (client, address, folder):
        if args.burst:
            tasks, sessions = await burst_timeouts(client, address, folder, args.burst, args.sticky_timeout)
            print(f"burst of {args.burst} sessions: {tasks} workflow tasks outwaited the sticky timeout, "
                  f"in {sessions} sessions")
            return
        report = await measure(client, address, folder, args.rounds, args.sticky_timeout)
    print(report.lines())
    print(json.dumps({**asdict(report), "crash_over_graceful": report.crash_over_graceful}))


if __name__ == "__main__":
    asyncio.run(main())
    from hitl.exit_cleanly import exit_now

    exit_now(0)
