"""Many paused sessions on one worker: start rate, worker memory, finding them, resuming them.

The load that `python -m bench.load --sessions 10000` (bench/load.py) measures and
tests/integration/test_load.py checks: against a dev server and one `python worker.py`
process, it parks that many sessions on an approval,
finds them two ways, and resumes every one of them with a rejection. Found by
list-and-query (list the running sessions, query each what waits: the worker
replays every session it no longer caches) and by the inbox (hitl/client/inbox.py:
visibility only, `HitlState="awaiting_human"` and each session's memo), with
their ratio, in the same run; and what a person waits for: the inbox's first
page, the oldest 100 items (medians of three reads). Each phase has a
deadline; the report counts what each phase reached by then, so a session
that never parked, was not found or never resumed shows up as a number short
of `sessions`. tests/integration/test_load.py runs it with 1,000 sessions and asserts
that every count is complete.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable

from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from hitl.client.inbox import LIMIT, Inbox, count, read_inbox, visibility_query
from hitl.client.updates import execute_update_retrying
from workflows.agent import AgentWorkflow
from workflows.contract import PENDING, REJECT, STATUS

CONCURRENCY = 64
INBOX_READS = 3
MESSAGE = "please delete notes.txt"


@dataclass
class Deadlines:
    """How long each phase may take, in seconds, before what it has not reached counts as missing."""

    park_all: float = 3600
    find_all: float = 3600
    resume_each: float = 600


@dataclass
class LoadReport:
    sessions: int
    start_seconds: float
    starts_per_second: float
    parked: int
    all_parked_seconds: float
    slowest_park_seconds: float
    worker_rss_mb: float
    found: int
    find_all_seconds: float
    inbox_found: int  # by the whole inbox: one visibility list with memos
    inbox_all_seconds: float  # reading the whole inbox (median of INBOX_READS reads)
    inbox_speedup: float  # find_all_seconds / inbox_all_seconds: finding them all, the two ways
    inbox_page_items: int  # the inbox's first page: the oldest LIMIT items
    inbox_page_seconds: float  # what a person waits for their inbox (median of INBOX_READS reads)
    resume_seconds: float  # one random session, on an otherwise quiet worker
    resumed: int
    resume_all_seconds: float
    median_resume_seconds: float
    slowest_resume_seconds: float

    def lines(self) -> str:
        return "\n".join(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}"
                         for key, value in asdict(self).items())


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


async def within(seconds: float, work: Awaitable[Any]) -> None:
    """Run `work` until done or out of time; the caller counts what it reached."""
    try:
        await asyncio.wait_for(work, timeout=seconds)
    except asyncio.TimeoutError:
        pass


async def patiently(ask: Callable[[], Awaitable[Any]]) -> Any:
    """A query can time out while the worker is saturated; that is load, not an answer."""
    while True:
        try:
            return await ask()
        except RPCError:
            await asyncio.sleep(1)


async def watch_parking(workspace: Path, ids: list[str], parked_at: dict[str, float]) -> None:
    """Each pause notifies (notifications.jsonl), as people would learn of it: no polling the sessions."""
    notifications = workspace / "notifications.jsonl"
    seen = 0
    while len(parked_at) < len(ids):
        await asyncio.sleep(0.5)
        if notifications.exists():
            *complete, _partial = notifications.read_text().split("\n")
            now = time.perf_counter()
            for line in complete[seen:]:
                parked_at.setdefault(json.loads(line)["session_id"], now)
            seen = len(complete)


async def find_each(client: Client, task_queue: str, found: set[str]) -> None:
    """What an inbox does: list the running sessions, then ask each what waits."""
    running = [w.id async for w in client.list_workflows(f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'")]

    async def look(session_id: str) -> None:
        handle = client.get_workflow_handle(session_id)
        try:
            pending = await patiently(lambda: handle.query(PENDING.name, rpc_timeout=timedelta(seconds=30)))
        except WorkflowQueryFailedError:
            return  # the worker could not answer for this session: not found, and the count says so
        if [(item["kind"], item["tool"]) for item in pending] == [("approval", "delete_file")]:
            found.add(session_id)

    await bounded(running, look)


async def read_the_inbox(client: Client, task_queue: str, parked: int, patience: float) -> dict[str, float]:
    """What the inbox does (hitl/client/inbox.py): visibility only, no query. Once visibility shows every
    parked session (it follows them by a moment), the median of INBOX_READS reads of each: the whole
    inbox (one list of every waiting session with its memo) and its first page (the oldest LIMIT)."""
    query = visibility_query(task_queue)
    give_up = time.perf_counter() + patience
    while await count(client, query) < parked and time.perf_counter() < give_up:
        await asyncio.sleep(0.5)

    async def timed(limit: int | None) -> tuple[float, Inbox]:
        began = time.perf_counter()
        inbox = await read_inbox(client, task_queue=task_queue, limit=limit)
        return time.perf_counter() - began, inbox

    whole = [await timed(None) for _ in range(INBOX_READS)]
    page = [await timed(LIMIT) for _ in range(INBOX_READS)]
    parked_ones = {item.session_id for item in whole[-1][1].items if (item.kind, item.tool) == ("approval", "delete_file")}
    return {
        "inbox_found": len(parked_ones),
        "inbox_all_seconds": statistics.median(seconds for seconds, _ in whole),
        "inbox_page_items": len(page[-1][1].items),
        "inbox_page_seconds": statistics.median(seconds for seconds, _ in page),
    }


async def resume(handle: WorkflowHandle[Any, Any]) -> float:
    """Reject the pending call and wait until the session has answered: the seconds it took."""
    began = time.perf_counter()
    await execute_update_retrying(handle, REJECT.update, {"reason": "load test"})
    while (await patiently(lambda: handle.query(STATUS.name, rpc_timeout=timedelta(seconds=30))))["state"] != "idle":
        await asyncio.sleep(0.05)
    return time.perf_counter() - began


async def resume_each(client: Client, ids: list[str], deadline: float, took: dict[str, float]) -> None:
    async def one(session_id: str) -> None:
        try:
            took[session_id] = await asyncio.wait_for(resume(client.get_workflow_handle(session_id)), deadline)
        except (asyncio.TimeoutError, WorkflowUpdateFailedError, WorkflowQueryFailedError, RPCError):
            pass  # not resumed: the report's count says so

    await bounded(ids, one)


async def run_load(
    client: Client, worker_pid: int, task_queue: str, sessions: int, prefix: str, workspace: Path,
    deadlines: Deadlines = Deadlines(),
) -> LoadReport:
    ids = [f"{prefix}-{n:05d}" for n in range(sessions)]
    started_at: dict[str, float] = {}
    parked_at: dict[str, float] = {}

    async def start(session_id: str) -> None:
        started_at[session_id] = time.perf_counter()
        await client.start_workflow(AgentWorkflow.run, {"message": MESSAGE}, id=session_id, task_queue=task_queue)

    began = time.perf_counter()
    watcher = asyncio.create_task(watch_parking(workspace, ids, parked_at))
    await bounded(ids, start)
    started = time.perf_counter() - began
    await within(deadlines.park_all - started, watcher)
    all_parked = time.perf_counter() - began
    slowest_park = max((parked_at[s] - started_at[s] for s in parked_at), default=float("nan"))
    memory = rss_mb(worker_pid)

    found: set[str] = set()
    found_at = time.perf_counter()
    await within(deadlines.find_all, find_each(client, task_queue, found))
    find_all = time.perf_counter() - found_at
    inbox = await read_the_inbox(client, task_queue, len(parked_at), min(deadlines.find_all, 60))

    chosen, *others = random.sample(ids, len(ids))
    took: dict[str, float] = {}
    await resume_each(client, [chosen], deadlines.resume_each, took)
    resumed_at = time.perf_counter()
    await resume_each(client, others, deadlines.resume_each, took)
    resume_all = time.perf_counter() - resumed_at
    latencies = list(took.values()) or [float("nan")]
    return LoadReport(
        sessions=sessions, start_seconds=started, starts_per_second=sessions / started,
        parked=len(parked_at), all_parked_seconds=all_parked, slowest_park_seconds=slowest_park,
        worker_rss_mb=memory, found=len(found), find_all_seconds=find_all,
        inbox_found=int(inbox["inbox_found"]), inbox_all_seconds=inbox["inbox_all_seconds"],
        inbox_speedup=find_all / inbox["inbox_all_seconds"], inbox_page_items=int(inbox["inbox_page_items"]),
        inbox_page_seconds=inbox["inbox_page_seconds"],
        resume_seconds=took.get(chosen, float("nan")), resumed=len(took), resume_all_seconds=resume_all,
        median_resume_seconds=statistics.median(latencies), slowest_resume_seconds=max(latencies),
    )
