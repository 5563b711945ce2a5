"""One worker process for bench/throughput.py: the product's or the floor's, with the same script.

    python -m bench.throughput_worker --design product|unsandboxed|floor|delegating --address HOST:PORT
        --task-queue Q --workspace DIR --steps 11 --text-bytes 500 --model-seconds 0
        --calls-file FILE

A process of its own, so the benchmark reads this worker's CPU time and memory
from /proc and nothing else's. Both designs get the same worker tuning (the
product's, `WorkerTuning.from_env`) and the same scripted model
(tests/support/scripted_model.py: a tool call every step, an answer at `--steps`;
a delegating root's hand-over and answer),
optionally sleeping `--model-seconds` per call, and the same tool (`bench_step`,
registered here: a constant text, so neither design pays for a tool the other
does not run). On SIGTERM it writes every
model call (session, step, start, seconds) to `--calls-file` as JSON lines, for
the step overheads, and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from activities.tools import tool
from bench.history import RawLongActivities
from bench.raw_agent import RawLongAgent
from tests.support.scripted_model import LongTurnModel
from hitl.devserver import connect_when_ready
from hitl.exit_cleanly import exit_now
from hitl.worker import WorkerTuning, build_worker
from workflows.conversation import ModelReply
from workflows.requests import ModelRequest


TOOL = "bench_step"


@tool(name=TOOL)
async def bench_step(step: int) -> str:
    """One step of the benchmark's turn: runs without asking and says so (async, like the
    floor's tool: a plain function would run in a thread, which the floor does not pay for)."""
    return step_text(step)


def step_text(step: int) -> str:
    return f"step {step} done"


class FloorActivities(RawLongActivities):
    """The floor's model and tool: the same script, and the same tool text as bench_step's."""

    @activity.defn(name="raw_long_tool")
    async def run_tool(self, call: dict) -> str:
        return step_text(json.loads(call["function"]["arguments"])["step"])


@dataclass(frozen=True)
class TimedCall:
    """One model call as the worker saw it: whose, which step, when it began (wall clock) and how long."""

    session: str
    step: int
    started: float
    seconds: float


class TimedModel(LongTurnModel):
    """The long-turn script, sleeping `latency` per call, each call remembered with its session."""

    def __init__(self, steps: int, text_bytes: int, latency: float) -> None:
        super().__init__(steps, text_bytes, tool_name=TOOL, remember_requests=False)
        self.latency = latency
        self.timed: list[TimedCall] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.time()  # wall clock: comparable across processes, unlike perf_counter
        if self.latency:
            await asyncio.sleep(self.latency)
        reply = await super().complete(request)
        step = self.calls[-1].step
        self.calls.clear()  # the per-session record below is what the benchmark reads
        self.timed.append(TimedCall(activity.info().workflow_id, step, started, time.time() - started))
        return reply


def make_worker(client: Client, design: str, task_queue: str, workspace: Path, model: TimedModel) -> Worker:
    tuning = WorkerTuning.from_env()
    if design in ("product", "unsandboxed", "delegating"):
        return build_worker(client, task_queue, model, workspace,
                            tuning=dataclasses.replace(tuning, sandbox=design != "unsandboxed" and tuning.sandbox))
    # The sandbox imports the floor's module afresh for each session: from a bytecode cache, as any
    # installed program's, rather than compiled again (PYTHONDONTWRITEBYTECODE may be set here).
    sys.pycache_prefix, sys.dont_write_bytecode = tempfile.mkdtemp(prefix="floor-pycache-"), False
    activities = FloorActivities(model)
    return Worker(client, task_queue=task_queue, workflows=[RawLongAgent],
                  activities=[activities.call_model, activities.run_tool], **tuning.worker_options())


async def serve(args: argparse.Namespace) -> None:
    client = await connect_when_ready(args.address)
    model = TimedModel(args.steps, args.text_bytes, args.model_seconds)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with make_worker(client, args.design, args.task_queue, Path(args.workspace), model):
        print("polling", flush=True)
        await stop.wait()
    Path(args.calls_file).write_text("".join(json.dumps(asdict(call)) + "\n" for call in model.timed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=("product", "unsandboxed", "floor", "delegating"), required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--text-bytes", type=int, default=500)
    parser.add_argument("--model-seconds", type=float, default=0.0)
    parser.add_argument("--calls-file", required=True)
    asyncio.run(serve(parser.parse_args()))
    exit_now(0)


if __name__ == "__main__":
    main()
