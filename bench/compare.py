"""What durability costs: this product against the engine's floor and no durability at all.

    python -m bench.compare [--sessions 30] [--latency-sessions 5] [--steps 200]
                            [--sizes 10 100 1000] [--text-bytes 5000]

One scenario, three ways, in the same run on the same embedded dev server
(file-backed SQLite with the demo's pragmas): a message, an approval pause, the
approval, the tool, the answer, with a model that answers at once.

- product: AgentWorkflow with the offline model, driven through its Updates and queries;
- raw:     the smallest Temporal workflow doing the same (model activity, wait for a
           signal-backed Update, tool activity, model activity): the engine's floor;
- asyncio: the same steps in a plain in-process loop, no durability.

Reported as ratios against the floor, plus the approve-to-tool-running latency,
the orchestration share of wall time with a 1 s model, and history size per step
(summed over every run of a session). Then bench/history.py's table on the same
server: long turns of each size, product against the raw floor fed the whole
conversation, history bytes per step against new content per step, and what a
step costs besides the model at step 10, 100 and 1,000.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.offline_model import OfflineModel
from activities.tools import tool
from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from hitl.worker import build_worker
from workflows.agent import AgentWorkflow
from workflows.contract import APPROVE, PENDING, STATUS
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest
from bench.history import SIZES, TEXT_BYTES, compare_long_turns, table
from bench.raw_agent import TOOL_STARTED, RawAgent, raw_model, raw_tool
from hitl.client.sessions import HistoryMeasure, measure_history


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


# ------------------------------------------------------------------ drivers


async def poll(check: Any, interval: float = 0.01) -> None:
    while not await check():
        await asyncio.sleep(interval)


async def product_session(client: Client, task_queue: str) -> tuple[float, float, str]:
    token = uuid.uuid4().hex
    began = time.perf_counter()
    handle = await client.start_workflow(AgentWorkflow.run, {"message": token}, id=f"p-{token}", task_queue=task_queue)
    await poll(lambda: handle.query(PENDING.name))
    approved = time.perf_counter()
    await handle.execute_update(APPROVE.update.name, {})
    await poll(lambda: _idle(handle))
    return time.perf_counter() - began, TOOL_STARTED[token] - approved, handle.id


async def _idle(handle: Any) -> bool:
    return (await handle.query(STATUS.name))["state"] == "idle"


async def raw_session(client: Client, task_queue: str) -> tuple[float, float, str]:
    token = uuid.uuid4().hex
    began = time.perf_counter()
    handle = await client.start_workflow(RawAgent.run, token, id=f"r-{token}", task_queue=task_queue)
    await poll(lambda: handle.query(RawAgent.is_waiting))
    approved = time.perf_counter()
    await handle.execute_update(RawAgent.approve)
    await poll(lambda: handle.query(RawAgent.is_done))  # observed the same way as the product's answer
    return time.perf_counter() - began, TOOL_STARTED[token] - approved, handle.id


async def asyncio_session() -> tuple[float, float, str]:
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
    return time.perf_counter() - began, TOOL_STARTED[token] - approved, ""


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


async def measure(runs: int, rounds: int, contenders: dict[str, Any]) -> list[Series]:
    """Each contender alone with its own worker (two workers in one process slow each
    other down), in rounds, so a noisy moment on this machine hits every contender alike."""
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, (worker, session) in contenders.items():
            async with worker():
                await session()  # warm up: first-run imports and caches are not the steady state
                results[name] += [await session() for _ in range(max(1, runs // rounds))]
    return [Series(name, [r[0] for r in rs], [r[1] for r in rs]) for name, rs in results.items()]


async def history_size(client: Client, task_queue: str, steps: int) -> HistoryMeasure:
    """Summed over every run: `handle.fetch_history()` alone follows the chain to the newest
    run and would report only what came after the last continue-as-new."""
    handle = await client.start_workflow(
        AgentWorkflow.run, {"message": "bench", "max_steps": steps + 1, "auto_approve": ["bench_tool"]},
        id=f"h-{uuid.uuid4().hex}", task_queue=task_queue,
    )
    await poll(lambda: _idle(handle), interval=0.05)
    return await measure_history(client, handle.id)


async def run(sessions: int, latency_sessions: int, steps: int, sizes: tuple[int, ...], text_bytes: int) -> tuple[dict[str, Any], str]:
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        server = start_dev_server(Path(folder) / "temporal.db", port=port, ui_port=free_port())
        try:
            client = await connect_when_ready(f"127.0.0.1:{port}")
            workspace = Path(folder) / "workspace"
            product, raw, plain = await measure(sessions, 3, {
                "product": (lambda: build_worker(client, "bench-product", InstantModel(), workspace),
                            lambda: product_session(client, "bench-product")),
                "raw": (lambda: Worker(client, task_queue="bench-raw", workflows=[RawAgent], activities=[raw_model, raw_tool]),
                        lambda: raw_session(client, "bench-raw")),
                "asyncio": (contextlib.nullcontext, asyncio_session),
            })
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
            long_turns = await compare_long_turns(client, workspace, sizes, text_bytes)
        finally:
            stop_dev_server(server)
    return {
        "sessions": sessions,
        "median_session_ms": {s.name: round(s.median * 1000, 3) for s in (product, raw, plain)},
        "session_ratio_vs_raw": {s.name: round(s.median / raw.median, 4) for s in (product, raw, plain)},
        "approve_to_tool_median_ms": {s.name: round(s.resume_median * 1000, 3) for s in (product, raw, plain)},
        "orchestration_share_with_1s_model": round(1 - slow_model.model_seconds / wall, 3),
        "history_one_step": {"runs": one.runs, "events": one.events, "bytes": one.bytes},
        "history_per_step_in_long_session": {"events": round(many.events / steps, 1), "bytes": round(many.bytes / steps)},
        f"history_{steps}_step_session": {"runs": many.runs, "events": many.events, "bytes": many.bytes},
    }, table(long_turns, text_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--latency-sessions", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="steps of each long turn")
    parser.add_argument("--text-bytes", type=int, default=TEXT_BYTES, help="text the model writes each step")
    args = parser.parse_args()
    figures, long_turns = asyncio.run(run(args.sessions, args.latency_sessions, args.steps, tuple(args.sizes), args.text_bytes))
    print(json.dumps(figures, indent=2))
    print()
    print(long_turns)


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
