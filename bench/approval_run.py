"""One run of bench/compare.py's approval scenario, product and floor, with what each session cost.

    python -m bench.approval_run [--sessions 20] [--floor-first]

A process of its own (bench/table.py starts one per run: the issue's bimodal
approval path is a property of a worker *process*, fast or slow for every
decision it handles, so runs in one process would hide it). Its own dev server
with its Prometheus endpoint; for each design, compare.py's worker and driver
(a message, the approval pause, the approval, the tool, the answer, a model that
answers at once), a warm-up session, then `--sessions` sessions one after
another. Printed as one JSON object, per design:

- approve_to_tool_ms: each session's approval sent -> the tool running (its own clock);
- session_ms: each whole session, start to the answer seen;
- events, workflow_tasks: per session, from its history;
- requests: the server frontend's round trips per session (its `service_requests`
  counter) less the driver's polling: its queries, and the poll and the answer
  that carry each query to the worker and back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from bench.compare import InstantModel, product_session, raw_session
from bench.raw_agent import RawAgent, raw_model, raw_tool
from bench.process_figures import server_requests
from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from hitl.worker import build_worker

METRICS_FLUSH_SECONDS = 2.0  # the server reports its counters about once a second


def round_trips(requests: dict[str, int]) -> int:
    """The frontend's requests less the driver's polling: each query is a QueryWorkflow, a poll
    that hands it to the worker and the worker's RespondQueryTaskCompleted."""
    queries = requests.get("RespondQueryTaskCompleted", 0)
    return sum(requests.values()) - requests.get("QueryWorkflow", 0) - 2 * queries


async def per_session(client: Client, ids: list[str]) -> tuple[float, float]:
    """Median events and workflow tasks per session, from the histories."""
    events, tasks = [], []
    for session_id in ids:
        history = (await client.get_workflow_handle(session_id).fetch_history()).events
        events.append(len(history))
        tasks.append(sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history))
    return statistics.median(events), statistics.median(tasks)


async def design(client: Client, metrics: str, worker: Callable[[], Any],
                 session: Callable[[], Awaitable[tuple[float, float, str]]], sessions: int) -> dict[str, Any]:
    async with worker():
        await session()  # warm up: first-run imports and caches are not the steady state
        await asyncio.sleep(METRICS_FLUSH_SECONDS)
        before = server_requests(metrics)
        measured = [await session() for _ in range(sessions)]
        await asyncio.sleep(METRICS_FLUSH_SECONDS)
        requests = server_requests(metrics) - before
    events, tasks = await per_session(client, [m[2] for m in measured])
    return {
        "approve_to_tool_ms": [round(m[1] * 1000, 2) for m in measured],
        "session_ms": [round(m[0] * 1000, 2) for m in measured],
        "events": events, "workflow_tasks": tasks, "requests": round_trips(requests) / sessions,
    }


async def run(sessions: int, floor_first: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port, metrics_port = free_port(), free_port()
        server = start_dev_server(folder / "temporal.db", port=port, ui_port=free_port(),
                                  extra_args=["--metrics-port", str(metrics_port)])
        try:
            client = await connect_when_ready(f"127.0.0.1:{port}")
            metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            designs = {
                "product": (lambda: build_worker(client, "bench-product", InstantModel(), folder / "workspace"),
                            lambda: product_session(client, "bench-product")),
                "floor": (lambda: Worker(client, task_queue="bench-raw", workflows=[RawAgent],
                                         activities=[raw_model, raw_tool]),
                          lambda: raw_session(client, "bench-raw")),
            }
            order = ["floor", "product"] if floor_first else ["product", "floor"]
            return {name: await design(client, metrics, *designs[name], sessions) for name in order}
        finally:
            stop_dev_server(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--floor-first", action="store_true", help="measure the floor before the product")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.sessions, args.floor_first))))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
