"""Where a whole approve session's time goes, product against a plain Temporal workflow, from the histories.

    python -m bench.approve_breakdown [--sessions 10] [--floor-first | --interleave]

bench/approval_run.py's scenario (a message, the approval pause, the approval, the tool, the
answer; a model that answers at once) on its own dev server, each design's warm-up session
first. Each measured session's history is read on the server's clock and cut into:

- workflow tasks: scheduled -> started (the server handing the task over) and started ->
  completed (the worker running it, local activities included), each task named by what it
  recorded (the local activities' markers, search-attribute and memo upserts, activities
  scheduled, Updates and signals taken);
- activities: scheduled -> completed;
- the driver: completed -> the next thing the client sent (its poll for the pause, its approval).

Whichever design runs second waits longer for the server to hand its workflow tasks over, so
`--interleave` keeps both workers up and runs one session of each design in turn instead.

Printed per design: the median session (first event to last), and the median per session of
each part, with the product's minus the floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Awaitable, Callable

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.worker import Worker

from bench.compare import InstantModel, product_session, raw_session
from bench.raw_agent import RawAgent, raw_model, raw_tool
from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from hitl.worker import build_worker

WT = EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
CLIENT_SENT = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "start",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
}
RECORDED = {
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "search attributes",
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: "memo",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED: "update done",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
}


def ms(event: HistoryEvent) -> float:
    return event.event_time.seconds * 1000 + event.event_time.nanos / 1e6


def marker_name(event: HistoryEvent) -> str:
    """A local activity's type, from its marker's details (else the marker's own name)."""
    details = event.marker_recorded_event_attributes.details
    data = details.get("data")
    if data is not None and data.payloads:
        text = data.payloads[0].data.decode(errors="replace")
        for field in ('"activity_type":"', '"activity_type": "'):
            if field in text:
                return "local " + text.split(field, 1)[1].split('"', 1)[0]
    return "marker " + event.marker_recorded_event_attributes.marker_name


def what_it_recorded(events: list[HistoryEvent], completed_at: int) -> str:
    names = []
    for event in events[completed_at + 1:]:
        if event.event_type == WT[0]:
            break
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            names.append(marker_name(event))
        elif event.event_type in RECORDED:
            names.append(RECORDED[event.event_type])
    return ", ".join(dict.fromkeys(names)) or "nothing"


def parts(events: list[HistoryEvent]) -> dict[str, float]:
    """Milliseconds per part of one session, named as the module's docstring says."""
    spent: dict[str, float] = defaultdict(float)
    scheduled = started = None
    activity_at: dict[int, float] = {}
    last_done = None
    for index, event in enumerate(events):
        kind = event.event_type
        if kind == WT[0]:
            scheduled = ms(event)
        elif kind == WT[1] and scheduled is not None:
            started = ms(event)
            spent["workflow task: server hand-over"] += started - scheduled
        elif kind == WT[2] and started is not None:
            spent[f"workflow task recording {what_it_recorded(events, index)}"] += ms(event) - started
            spent["workflow tasks: worker, all"] += ms(event) - started
            spent["workflow tasks (count)"] += 1
            last_done = ms(event)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activity_at[event.event_id] = ms(event)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            at = activity_at.get(event.activity_task_completed_event_attributes.scheduled_event_id)
            if at is not None:
                spent["activities"] += ms(event) - at
        elif kind in CLIENT_SENT and last_done is not None:
            spent[f"driver, until its {CLIENT_SENT[kind]}"] += ms(event) - last_done
    spent["session (first event to last)"] = ms(events[-1]) - ms(events[0])
    return spent


async def design(client: Client, worker: Callable[[], Any], session: Callable[[], Awaitable[tuple[float, float, str]]],
                 sessions: int) -> tuple[dict[str, float], list[float]]:
    async with worker():
        await session()  # warm-up
        measured = [await session() for _ in range(sessions)]
    each = [parts(list((await client.get_workflow_handle(m[2]).fetch_history()).events)) for m in measured]
    names = {name for one in each for name in one}
    return {name: statistics.median(one.get(name, 0.0) for one in each) for name in names}, [m[0] * 1000 for m in measured]


async def interleaved(client: Client, designs: dict[str, Any], sessions: int) -> dict[str, tuple[dict[str, float], list[float]]]:
    """Both workers up, one session of each design in turn (which goes first alternates), so
    neither design is the one that runs second."""
    measured: dict[str, list[tuple[float, float, str]]] = {name: [] for name in designs}
    async with designs["product"][0](), designs["floor"][0]():
        for name in designs:
            await designs[name][1]()  # warm-up
        for index in range(sessions):
            for name in (["product", "floor"] if index % 2 == 0 else ["floor", "product"]):
                measured[name].append(await designs[name][1]())
    found = {}
    for name, runs in measured.items():
        each = [parts(list((await client.get_workflow_handle(m[2]).fetch_history()).events)) for m in runs]
        names = {part for one in each for part in one}
        found[name] = ({part: statistics.median(one.get(part, 0.0) for one in each) for part in names},
                       [m[0] * 1000 for m in runs])
    return found


async def run(sessions: int, floor_first: bool, interleave: bool = False) -> dict[str, tuple[dict[str, float], list[float]]]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port = free_port()
        server = start_dev_server(folder / "temporal.db", port=port, ui_port=free_port())
        try:
            client = await connect_when_ready(f"127.0.0.1:{port}")
            designs = {
                "product": (lambda: build_worker(client, "bench-product", InstantModel(), folder / "workspace"),
                            lambda: product_session(client, "bench-product")),
                "floor": (lambda: Worker(client, task_queue="bench-raw", workflows=[RawAgent], activities=[raw_model, raw_tool]),
                          lambda: raw_session(client, "bench-raw")),
            }
            if interleave:
                return await interleaved(client, designs, sessions)
            order = ["floor", "product"] if floor_first else ["product", "floor"]
            return {name: await design(client, *designs[name], sessions) for name in order}
        finally:
            stop_dev_server(server)


def table(figures: dict[str, tuple[dict[str, float], list[float]]]) -> str:
    product, floor = figures["product"][0], figures["floor"][0]
    lines = [f"session as the driver saw it (median ms): product {statistics.median(figures['product'][1]):.1f}, "
             f"floor {statistics.median(figures['floor'][1]):.1f}",
             f"{'part (median ms per session)':78} {'product':>8} {'floor':>8} {'diff':>8}"]
    for name in sorted(set(product) | set(floor)):
        mine, theirs = product.get(name, 0.0), floor.get(name, 0.0)
        lines.append(f"{name[:78]:78} {mine:8.1f} {theirs:8.1f} {mine - theirs:+8.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--floor-first", action="store_true", help="measure the floor before the product")
    parser.add_argument("--interleave", action="store_true", help="both workers up, one session of each in turn")
    args = parser.parse_args()
    print(table(asyncio.run(run(args.sessions, args.floor_first, args.interleave))))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
