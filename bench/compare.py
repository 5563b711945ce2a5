"""What durability costs: this product against the engine's floor and no durability at all.

    python -m bench.compare [--sessions 30] [--latency-sessions 5] [--steps 200]

One scenario, three ways, in the same run on the same embedded dev server
(file-backed SQLite with the demo's pragmas): a message, an approval pause, the
approval, the tool, the answer, with a model that answers at once.

- product: AgentWorkflow with the offline model, driven through its Updates and queries;
- raw:     the smallest Temporal workflow doing the same (model activity, wait for a
           signal-backed Update, tool activity, model activity): the engine's floor;
- asyncio: the same steps in a plain in-process loop, no durability.

Reported as ratios against the floor, plus the approve-to-tool-running latency,
the orchestration share of wall time with a 1 s model, and history size per step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from activities.offline_model import OfflineModel
from activities.tools import tool
from devserver import start_dev_server, stop_dev_server
from settings import DATA_CONVERTER
from worker import build_worker
from workflows.agent import AgentWorkflow
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest

TOOL_STARTED: dict[str, float] = {}


@tool(needs_approval=True)
def bench_tool(token: str) -> str:
    """A side effect that records when it started running."""
    TOOL_STARTED[token] = time.perf_counter()
    return f"done {token}"


class InstantModel(OfflineModel):
    """Calls bench_tool once per turn, then answers; optional latency per call."""

    def __init__(self, latency: float = 0.0, steps: int = 1) -> None:
        self.latency = latency
        self.steps = steps
        self.model_seconds = 0.0

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self.latency:
            await asyncio.sleep(self.latency)
            self.model_seconds += self.latency
        calls = [m for m in request.messages if m.role == "tool"]
        last_user = next(m.content for m in reversed(request.messages) if m.role == "user")
        if len(calls) >= self.steps:
            return ModelReply(content="finished")
        name = "bench_tool" if len(calls) == 0 else "search_web"
        args = {"token": last_user} if name == "bench_tool" else {"query": "bench"}
        return ModelReply(tool_calls=[ToolCall(id=f"call_{len(calls)}", function=FunctionCall(name=name, arguments=json.dumps(args)))])


# ------------------------------------------------------------------ the floor


@activity.defn(name="raw_model")
async def raw_model(step: int) -> str:
    return "call the tool" if step == 0 else "finished"


@activity.defn(name="raw_tool")
async def raw_tool(token: str) -> str:
    TOOL_STARTED[token] = time.perf_counter()
    return f"done {token}"


@workflow.defn
class RawAgent:
    """The least a durable agent with one approval can do."""

    def __init__(self) -> None:
        self.waiting = False
        self.approved = False

    @workflow.run
    async def run(self, token: str) -> str:
        await workflow.execute_activity(raw_model, 0, start_to_close_timeout=timedelta(seconds=30))
        self.waiting = True
        await workflow.wait_condition(lambda: self.approved)
        await workflow.execute_activity(raw_tool, token, start_to_close_timeout=timedelta(seconds=30))
        return await workflow.execute_activity(raw_model, 1, start_to_close_timeout=timedelta(seconds=30))

    @workflow.query
    def is_waiting(self) -> bool:
        return self.waiting and not self.approved

    @workflow.update
    def approve(self) -> bool:
        self.approved = True
        return True


# ------------------------------------------------------------------ drivers


async def poll(check: Any, interval: float = 0.002) -> None:
    while not await check():
        await asyncio.sleep(interval)


async def product_session(client: Client, task_queue: str) -> tuple[float, float]:
    token = uuid.uuid4().hex
    began = time.perf_counter()
    handle = await client.start_workflow(AgentWorkflow.run, {"message": token}, id=f"p-{token}", task_queue=task_queue)
    await poll(lambda: handle.query("pending"))
    approved = time.perf_counter()
    await handle.execute_update("approve_update", {})
    await poll(lambda: _idle(handle))
    return time.perf_counter() - began, TOOL_STARTED[token] - approved


async def _idle(handle: Any) -> bool:
    return (await handle.query("status"))["state"] == "idle"


async def raw_session(client: Client, task_queue: str) -> tuple[float, float]:
    token = uuid.uuid4().hex
    began = time.perf_counter()
    handle = await client.start_workflow(RawAgent.run, token, id=f"r-{token}", task_queue=task_queue)
    await poll(lambda: handle.query(RawAgent.is_waiting))
    approved = time.perf_counter()
    await handle.execute_update(RawAgent.approve)
    await handle.result()
    return time.perf_counter() - began, TOOL_STARTED[token] - approved


async def asyncio_session() -> tuple[float, float]:
    token = uuid.uuid4().hex
    began = time.perf_counter()
    approval = asyncio.Event()
    waiting = asyncio.Event()

    async def agent() -> str:
        await raw_model(0)
        waiting.set()
        await approval.wait()
        await raw_tool(token)
        return await raw_model(1)

    task = asyncio.create_task(agent())
    await waiting.wait()
    approved = time.perf_counter()
    approval.set()
    await task
    return time.perf_counter() - began, TOOL_STARTED[token] - approved


@dataclass
class Series:
    name: str
    totals: list[float]
    approve_to_tool: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.totals)

    @property
    def resume_median(self) -> float:
        return statistics.median(self.approve_to_tool)


async def series(name: str, runs: int, session: Any) -> Series:
    await session()  # warm up: first-run imports and caches are not the steady state
    results = [await session() for _ in range(runs)]
    return Series(name, [r[0] for r in results], [r[1] for r in results])


async def history_size(client: Client, task_queue: str, steps: int) -> tuple[int, int, int]:
    handle = await client.start_workflow(
        AgentWorkflow.run, {"message": "bench", "max_steps": steps + 1, "auto_approve": ["bench_tool"]},
        id=f"h-{uuid.uuid4().hex}", task_queue=task_queue,
    )
    await poll(lambda: _idle(handle), interval=0.05)
    history = await handle.fetch_history()
    size = sum(event.ByteSize() for event in history.events)
    return steps, len(history.events), size


async def run(sessions: int, latency_sessions: int, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        from tests.test_fault_drill import free_port

        port = free_port()
        server = start_dev_server(Path(folder) / "temporal.db", port=port, ui_port=free_port())
        try:
            client = await Client.connect(f"127.0.0.1:{port}", data_converter=DATA_CONVERTER)
            workspace = Path(folder) / "workspace"
            async with build_worker(client, "bench-product", InstantModel(), workspace), \
                    Worker(client, task_queue="bench-raw", workflows=[RawAgent], activities=[raw_model, raw_tool]):
                product = await series("product", sessions, lambda: product_session(client, "bench-product"))
                raw = await series("raw", sessions, lambda: raw_session(client, "bench-raw"))
                plain = await series("asyncio", sessions, asyncio_session)
            slow_model = InstantModel(latency=1.0)
            async with build_worker(client, "bench-slow", slow_model, workspace):
                began = time.perf_counter()
                for _ in range(latency_sessions):
                    await product_session(client, "bench-slow")
                wall = time.perf_counter() - began
            long_model = InstantModel(steps=steps)
            async with build_worker(client, "bench-long", long_model, workspace):
                one = await history_size(client, "bench-long", 1)
                many = await history_size(client, "bench-long", steps)
        finally:
            stop_dev_server(server)
    return {
        "sessions": sessions,
        "median_session_ms": {s.name: round(s.median * 1000, 1) for s in (product, raw, plain)},
        "session_ratio_vs_raw": {s.name: round(s.median / raw.median, 2) for s in (product, raw, plain)},
        "approve_to_tool_median_ms": {s.name: round(s.resume_median * 1000, 2) for s in (product, raw, plain)},
        "orchestration_share_with_1s_model": round(1 - slow_model.model_seconds / wall, 3),
        "history_one_step": {"events": one[1], "bytes": one[2]},
        "history_per_step_in_long_session": {"events": round(many[1] / steps, 1), "bytes": round(many[2] / steps)},
        f"history_{steps}_step_session": {"events": many[1], "bytes": many[2]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--latency-sessions", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.sessions, args.latency_sessions, args.steps)), indent=2))


if __name__ == "__main__":
    main()
    from exit_cleanly import exit_now

    exit_now(0)
