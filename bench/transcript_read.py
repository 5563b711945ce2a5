"""How long reading back the whole transcript of a long session takes: earlier runs replayed, or read from history.

    python -m bench.transcript_read [--steps 1000] [--result-bytes 20000] [--reads 1]

Its own dev server and an in-process worker. One turn of `steps` tool calls,
each returning `result_bytes` (the 1,000-step, 20 KB session of
tests/integration/test_long_sessions.py): continue-as-new makes several runs. Once it is
idle, the whole transcript is read back, timed, two ways:

- by queries (hitl/client/sessions.py read_by_queries, what `read_all` did
  before): every page of every earlier run is a `transcript_page` query that a
  worker answers by replaying that run;
- read_all now: each earlier run's history fetched once and its transcript
  rebuilt from its payloads (hitl/client/run_history.py), the newest run by
  its queries.

Both must give the same messages (checked). History is summed over every run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any, Awaitable, Callable

from activities.tools import tool
from tests.support.scripted_model import LongTurnModel
from temporalio.client import WorkflowHandle

from hitl.client.run_history import read_transcript
from hitl.client.sessions import measure_history, read_all, read_by_queries
from bench.own_server import own_dev_server
from hitl.worker import build_worker
from workflows.agent import AgentWorkflow
from workflows.limits import json_size

RESULT_BYTES = {"value": 20_000}


@tool
def bench_report(step: int) -> str:
    """Return a long report (the transcript-reading benchmark's tool)."""
    return f"report {step}: " + "r" * RESULT_BYTES["value"]


class Calls:
    """Where a reading's time goes: every query and history fetch it made, by run, timed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, float]] = []
        self.originals = (WorkflowHandle.query, WorkflowHandle.fetch_history)

    def __enter__(self) -> Calls:
        query, fetch = self.originals
        seen = self.seen

        async def timed_query(handle: WorkflowHandle, *args: Any, **options: Any) -> Any:
            began = time.perf_counter()
            try:
                return await query(handle, *args, **options)
            finally:
                seen.append(("query", handle.run_id, time.perf_counter() - began))

        async def timed_fetch(handle: WorkflowHandle, *args: Any, **options: Any) -> Any:
            began = time.perf_counter()
            try:
                return await fetch(handle, *args, **options)
            finally:
                seen.append(("history", handle.run_id, time.perf_counter() - began))

        WorkflowHandle.query, WorkflowHandle.fetch_history = timed_query, timed_fetch  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: Any) -> None:
        WorkflowHandle.query, WorkflowHandle.fetch_history = self.originals  # type: ignore[method-assign]

    def summary(self, total: float) -> str:
        parts = []
        for kind in ("query", "history"):
            earlier = [seconds for what, run, seconds in self.seen if what == kind and run]
            newest = [seconds for what, run, seconds in self.seen if what == kind and not run]
            if earlier or newest:
                parts.append(f"{len(earlier)} {kind} calls to earlier runs ({sum(earlier):.2f} s, slowest {max(earlier, default=0):.2f} s), "
                             f"{len(newest)} to the newest ({sum(newest):.2f} s)")
        spent = sum(seconds for _, _, seconds in self.seen)
        return "; ".join(parts) + f"; the rest (decoding, rebuilding) {max(0.0, total - spent):.2f} s"


async def timed(read: Callable[[], Awaitable[Any]], reads: int) -> tuple[list[float], Any]:
    seconds, answer = [], None
    for _ in range(reads):
        began = time.perf_counter()
        answer = await read()
        seconds.append(time.perf_counter() - began)
    return seconds, answer


async def bench(steps: int, result_bytes: int, reads: int) -> str:
    RESULT_BYTES["value"] = result_bytes
    async with own_dev_server() as (client, _, folder):
        task_queue = f"bench-read-{uuid.uuid4().hex[:8]}"
        model = LongTurnModel(steps, 200, tool_name="bench_report", remember_requests=False)
        async with build_worker(client, task_queue, model, folder / "workspace"):
            session = await client.start_workflow(AgentWorkflow.run, {"message": "work through the long task", "max_steps": steps},
                                                  id=f"long-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
            began = time.perf_counter()
            while (await client.get_workflow_handle(session.id).query("status"))["state"] != "idle":
                await asyncio.sleep(1)
            turn_seconds = time.perf_counter() - began
            history = await measure_history(client, session.id)
            with Calls() as slow_calls:
                by_queries, slow = await timed(lambda: read_by_queries(client, session.id, "transcript_page", "messages"), 1)
            with Calls() as fast_calls:
                now, fast = await timed(lambda: read_all(client, session.id, "transcript_page", "messages"), 1)
            by_queries += (await timed(lambda: read_by_queries(client, session.id, "transcript_page", "messages"), reads - 1))[0]
            now += (await timed(lambda: read_all(client, session.id, "transcript_page", "messages"), reads - 1))[0]
            from_history = await read_transcript(client, session.id)
    assert from_history is not None, "read_all fell back to queries: an earlier run has no usable index"
    assert fast == slow, "the two readings differ"
    return "\n".join([
        f"session: {steps} steps, {result_bytes:,}-byte tool results, turn took {turn_seconds:.0f} s; "
        f"{history.runs} runs, {history.events:,} events, {history.bytes / 1e6:.1f} MB of history over every run; "
        f"transcript {len(fast):,} messages, {sum(json_size(m) for m in fast) / 1e6:.1f} MB",
        f"read whole, by queries (earlier runs replayed): {' '.join(f'{s:.2f}' for s in by_queries)} s"
        f" (median {statistics.median(by_queries):.2f} s)",
        f"  first read: {slow_calls.summary(by_queries[0])}",
        f"read whole, read_all now (earlier runs from history): {' '.join(f'{s:.2f}' for s in now)} s"
        f" (median {statistics.median(now):.2f} s)",
        f"  first read: {fast_calls.summary(now[0])}",
        "the same messages both ways: yes",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--result-bytes", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=1)
    args = parser.parse_args()
    print(asyncio.run(bench(args.steps, args.result_bytes, args.reads)))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
