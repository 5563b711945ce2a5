"""What a short workflow task timeout costs: a long session that a worker without it in cache must replay.

    python -m bench.task_timeout [--steps 600] [--task-timeout 1.5 10]

A workflow task timeout under 2 s would bound the crash tail bench/kill.py
measures (a task the dead worker held is freed only by that timeout). But a
worker that does not have a session in its cache (it restarted, it evicted it,
it took over from a dead one) replays the session's whole history within one
workflow task. For each timeout: its own dev server, a session started with
that `task_timeout` runs one turn of `steps` tool calls on worker A (cached),
A stops, a fresh worker B takes the next message, and the bench reports how
long B took to answer it and how many workflow tasks timed out meanwhile
(within a deadline: a task that times out on every attempt never answers).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.own_server import own_dev_server
from tests.support.scripted_model import LongTurnModel
from hitl.client.sessions import measure_history
from hitl.worker import build_worker
from workflows.agent import AgentWorkflow

DEADLINE_SECONDS = 120


async def until(client: Client, session_id: str, done: str, deadline: float) -> bool:
    """Until the newest run's status says `done` turns were answered, or the deadline passes."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            status = await client.get_workflow_handle(session_id).query("status", rpc_timeout=timedelta(seconds=5))
            if status["state"] == "idle" and status["turn"] >= int(done):
                return True
        except Exception:
            pass  # a query needs a workflow task too: it fails like one while replays time out
        await asyncio.sleep(0.5)
    return False


async def timed_out_tasks(client: Client, session_id: str) -> int:
    history = await client.get_workflow_handle(session_id).fetch_history()
    return sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)


async def one(steps: int, task_timeout: float) -> str:
    async with own_dev_server() as (client, _, folder):
        task_queue = f"bench-wft-{uuid.uuid4().hex[:8]}"
        session_id = f"wft-{uuid.uuid4().hex[:8]}"
        model = LongTurnModel(steps, 200, remember_requests=False)
        async with build_worker(client, task_queue, model, folder / "a"):
            await client.start_workflow(AgentWorkflow.run, {"message": "work through the long task", "max_steps": steps},
                                        id=session_id, task_queue=task_queue, task_timeout=timedelta(seconds=task_timeout))
            if not await until(client, session_id, "1", 1800):
                return f"task timeout {task_timeout:g} s: the first turn did not finish"
        before = await timed_out_tasks(client, session_id)
        history = await measure_history(client, session_id)
        async with build_worker(client, task_queue, LongTurnModel(1, 200, remember_requests=False), folder / "b"):
            began = time.perf_counter()
            await client.get_workflow_handle(session_id).signal("user_message", {"text": "one more thing"})
            answered = await until(client, session_id, "2", DEADLINE_SECONDS)
            seconds = time.perf_counter() - began
        after = await timed_out_tasks(client, session_id)
    outcome = f"answered in {seconds:.1f} s" if answered else f"not answered within {DEADLINE_SECONDS} s"
    return (f"task timeout {task_timeout:g} s, newest run {history.largest_run_events:,} events "
            f"({history.runs} runs): a fresh worker {outcome}; {after - before} workflow tasks timed out meanwhile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--task-timeout", type=float, nargs="+", default=[1.5, 10.0])
    args = parser.parse_args()
    for task_timeout in args.task_timeout:
        print(asyncio.run(one(args.steps, task_timeout)), flush=True)


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
