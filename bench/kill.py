"""What a person waits for after approving, when the worker holding the session was SIGKILLed.

    python -m bench.kill --kills 20 [--b-after-kill] [--approve-after S] [--task-timeout S]
                                    [--lost-node] [--sticky-timeout S]

Its own dev server. Each kill, on a fresh task queue: a worker A (`python
worker.py`) takes a session to an approval pause and a worker B polls the same
queue from once the session waits (or starts right after the kill,
`--b-after-kill`); A is SIGKILLed while the session waits, the bench approves
(at once, or `--approve-after` seconds later), and measures, from the moment
it sent the approval (`--lost-node`: A is frozen instead, its connections open, as
a node that vanished leaves them, and killed 0.5 s after the approval):

- tool started: the approved `run_tool` activity's start (its history event);
- turn done: the session idle again (its `status` query, polled).

Every figure is printed, then the median and the max. For each kill the
session's history after the approval says where the time went: which task
queue each workflow task was scheduled on, which timed out and how, and who
started the tool. bench/sticky.py compares the kill with a graceful stop.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from tests.support.worker_processes import start_worker
from bench.own_server import own_dev_server
from tests.support.worker_processes import until_polling
from workflows.agent import AgentWorkflow

TOOL_TIMEOUT_SECONDS = 60
LOST_NODE_SECONDS = 0.5  # a frozen worker's open connection, before its process goes too


@dataclass
class Kill:
    tool_started: float  # seconds from the approval to the tool's start
    turn_done: float  # seconds from the approval to the session idle again
    story: str  # what the history says happened after the approval


def seconds(event: HistoryEvent) -> float:
    return event.event_time.ToMicroseconds() / 1e6


def story_after(events: list[HistoryEvent], approved_at: float) -> str:
    """The workflow-task and activity events from the approval's signal on, timed from it."""
    signalled = next((e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                      and e.workflow_execution_signaled_event_attributes.signal_name == "approve"), None)
    if signalled is None:
        return "no approve signal in history"
    parts = []
    for event in events[events.index(signalled):]:
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        at = f"{seconds(event) - approved_at:+.2f}"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            queue = event.workflow_task_scheduled_event_attributes.task_queue
            kind = "sticky" if queue.kind == 2 else "normal"
            parts.append(f"{at} wft scheduled ({kind})")
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            how = event.workflow_task_timed_out_event_attributes.timeout_type
            parts.append(f"{at} wft timed out ({['?', 'start_to_close', 'schedule_to_start', 'schedule_to_close', 'heartbeat'][how]})")
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            parts.append(f"{at} wft started by {event.workflow_task_started_event_attributes.identity.split('@')[0]}")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            parts.append(f"{at} {event.activity_task_scheduled_event_attributes.activity_type.name} scheduled")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attributes = event.activity_task_started_event_attributes
            parts.append(f"{at} activity started by {attributes.identity.split('@')[0]} (attempt {attributes.attempt})")
        elif event.event_type in (EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT):
            parts.append(f"{at} {name}")
    return "; ".join(parts)


def tool_start(events: list[HistoryEvent]) -> float | None:
    """When the (first) run_tool activity started, by its history event."""
    scheduled = {e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                 and e.activity_task_scheduled_event_attributes.activity_type.name == "run_tool"}
    for event in events:
        if (event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
                and event.activity_task_started_event_attributes.scheduled_event_id in scheduled):
            return seconds(event)
    return None


async def until_idle(session: WorkflowHandle, timeout: float = TOOL_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while (await session.query("status"))["state"] != "idle":
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session.id} not idle {timeout} s after the approval")
        await asyncio.sleep(0.02)


async def one_kill(client: Client, address: str, folder: Path, b_after_kill: bool, extra: dict[str, str],
                   settle: float, approve_after: float, task_timeout: float | None, lost_node: bool = False) -> Kill:
    task_queue = f"kill-{uuid.uuid4().hex[:8]}"
    workspace = folder / task_queue
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("remember the milk\n")

    def worker(name: str) -> subprocess.Popen[bytes]:
        env = {**extra, "HITL_WORKER_IDENTITY": f"{name}-{task_queue}"}
        return start_worker(address, task_queue, workspace, folder / f"{task_queue}-{name}.log", env)

    a, b = worker("a"), None
    try:
        await until_polling(client, task_queue, f"a-{task_queue}")
        session = await client.start_workflow(
            AgentWorkflow.run, {"message": "please delete notes.txt"}, id=task_queue, task_queue=task_queue,
            task_timeout=timedelta(seconds=task_timeout) if task_timeout else None,
        )
        while not await session.query("pending"):
            await asyncio.sleep(0.05)
        if not b_after_kill:
            b = worker("b")
            await until_polling(client, task_queue, f"b-{task_queue}")
        await asyncio.sleep(settle)
        a.send_signal(signal.SIGSTOP if lost_node else signal.SIGKILL)
        if not lost_node:
            a.wait()
        if b_after_kill:
            b = worker("b")
        await asyncio.sleep(approve_after)
        approved_at = time.time()
        await session.signal("approve", {"by": "bench"})
        if lost_node:  # its connections stayed open: the server hands it the task, then it is gone for good
            await asyncio.sleep(LOST_NODE_SECONDS)
            a.send_signal(signal.SIGKILL)
            a.wait()
        await until_idle(session)
        turn_done = time.time() - approved_at
        events = list((await session.fetch_history()).events)
        started = tool_start(events)
        if started is None:
            raise RuntimeError(f"session {task_queue}: the tool never started")
        return Kill(started - approved_at, turn_done, story_after(events, approved_at))
    finally:
        for process in (a, b):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait()


def summary(name: str, figures: list[float]) -> str:
    return (f"{name}: " + " ".join(f"{value:.2f}" for value in figures)
            + f"\n  median {statistics.median(figures):.2f} s, max {max(figures):.2f} s, "
            f"{sum(1 for value in figures if value >= 2)} of {len(figures)} at 2 s or more")


async def run(kills: int, b_after_kill: bool, extra: dict[str, str], settle: float = 0.0,
              approve_after: float = 0.0, task_timeout: float | None = None, lost_node: bool = False) -> str:
    results = []
    async with own_dev_server() as (client, address, folder):
        for index in range(kills):
            kill = await one_kill(client, address, folder, b_after_kill, extra, settle, approve_after, task_timeout,
                                  lost_node)
            print(f"kill {index + 1}: tool started {kill.tool_started:.2f} s, turn done {kill.turn_done:.2f} s"
                  f"  [{kill.story}]", flush=True)
            results.append(kill)
    return "\n".join([
        f"{kills} {'lost nodes (SIGSTOP, then SIGKILL after the approval)' if lost_node else 'kills'}, worker B {'started after the kill' if b_after_kill else 'already polling'}"
        + f", killed {settle:g} s after that, approved {approve_after:g} s after the kill"
        + f", workflow task timeout {task_timeout or 10:g} s" + (f", {extra}" if extra else ""),
        summary("approve -> tool started (s)", [k.tool_started for k in results]),
        summary("approve -> turn done (s)", [k.turn_done for k in results]),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--b-after-kill", action="store_true", help="start worker B after the kill, not before")
    parser.add_argument("--sticky-timeout", type=float, help="HITL_STICKY_TIMEOUT_SECONDS for the workers")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds between worker B polling and the kill")
    parser.add_argument("--approve-after", type=float, default=0.0,
                        help="seconds between the kill and the approval (0: at once, the worst case)")
    parser.add_argument("--task-timeout", type=float,
                        help="the session's workflow task timeout in seconds (Temporal's default: 10)")
    parser.add_argument("--lost-node", action="store_true",
                        help="freeze A (SIGSTOP) instead, so its connections stay open as a lost node's do; "
                             "SIGKILL it 0.5 s after the approval")
    args = parser.parse_args()
    extra = {} if args.sticky_timeout is None else {"HITL_STICKY_TIMEOUT_SECONDS": str(args.sticky_timeout)}
    print(asyncio.run(run(args.kills, args.b_after_kill, extra, args.settle, args.approve_after, args.task_timeout,
                            args.lost_node)))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
