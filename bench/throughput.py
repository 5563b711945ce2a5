"""Many sessions at once on one worker: the product against the engine's floor, in one run.

    python -m bench.throughput [--sessions 40] [--tool-steps 10] [--rounds 3]
                               [--text-bytes 500] [--model-seconds 0]
                               [--designs product unsandboxed floor delegating]

One dev server (file-backed SQLite, the demo's pragmas, its Prometheus
endpoint on a port of its own); for each design and round a fresh worker
*process* (bench/throughput_worker.py) on a task queue of its own; `--sessions`
sessions started at once, each one turn of `--tool-steps` tool steps and a final
answer, with the same scripted model (tests/support/scripted_model.py) and the same
tool (bench_step, a constant text). Designs alternate within each round (product, floor, product, ...),
so a noisy moment on a shared machine hits both alike; each figure is the
median over the rounds, and the ratios compare figures of the same run.

- product: AgentWorkflow (the model activity reads the conversation through a
           reference, the calls are judged in the worker, search attributes
           and memo published for inboxes);
- unsandboxed: the product on a worker with HITL_WORKFLOW_SANDBOX=off (its
           workflow outside Temporal's sandbox, docs/production.md);
- floor:   bench/raw_agent.py's RawLongAgent, whose every model activity is
           passed the whole conversation: the least a durable agent does
           (in the sandbox, as the SDK runs any workflow by default);
- delegating (run only when named): the product, each turn handed to one
           sub-agent (bench/throughput_delegating.py); per the child's tool
           step, both sessions' histories counted; ratios against the product.

Per tool step (the answer's model call is part of the turn's cost):

- steps/s: tool steps done / wall time from the first start to the last turn
  seen done (visibility: HitlState idle, or the floor's workflow completed,
  polled with one count request every POLL_SECONDS for all sessions; roots
  only: a child session has a parent link);
- worker CPU: the worker process's own user+system time over the phase (/proc);
- server CPU: the `temporal` server process tree's, likewise;
- events: history events of the measured sessions;
- requests: every round trip a client or worker made to the server's frontend
  during the phase (its `service_requests` counter), less the benchmark's own
  visibility counts;
- actions: Temporal Cloud's billable actions as estimated from the history
  (workflow start, each activity scheduled, each workflow task that ran local
  activities, timers, signals, Updates, search-attribute upserts) plus the
  server's query and heartbeat requests.

With `--model-seconds` and `--designs product` it is the many-sessions figure
(docs/evidence.md): memory per session (the worker's peak RSS during the phase
less its RSS before the sessions started, over the sessions), steps/s, and the
step overhead (one model call's start to the same session's next, less the
model's own time) at the median and the 99th percentile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.tools import CATALOG
from tests.support.load import rss_mb
from bench.process_figures import cpu_seconds, load_average, server_requests, start_profiler, stop_profiler
from bench import throughput_delegating as delegating
from bench.throughput_worker import TOOL  # registers the benchmark's tool in this catalog too
from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from workflows.session import DEFAULT_SYSTEM_PROMPT

ROOT = Path(__file__).resolve().parent.parent
DESIGNS = ("product", "unsandboxed", "floor")  # the default run
CHOICES = (*DESIGNS, "delegating")
MESSAGE = "work through the long task"
WARMUP_SESSIONS = 2  # first-run imports and caches are not the steady state
POLL_SECONDS = 0.1
START_CONCURRENCY = 64
PHASE_TIMEOUT_SECONDS = 3_600
METRICS_FLUSH_SECONDS = 2.0  # the server reports its counters about once a second
BILLED_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_TIMER_STARTED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
}
BILLED_REQUESTS = ("QueryWorkflow", "RecordActivityTaskHeartbeat", "RecordActivityTaskHeartbeatById")
OWN_REQUESTS = ("CountWorkflowExecutions",)  # the benchmark's polling, not the designs' work


# ------------------------------------------------------------------ one phase: one design, one round


@dataclass
class Phase:
    design: str
    sessions: int
    tool_steps: int  # per session
    finished: int
    wall: float
    worker_cpu: float
    server_cpu: float
    events: Counter[str]  # by type
    requests: Counter[str]
    actions: int
    rss_before_mb: float
    rss_peak_mb: float
    overheads: list[float] = field(default_factory=list, repr=False)  # seconds besides the model, every step

    @property
    def steps(self) -> int:
        return self.finished * self.tool_steps

    def per_step(self, value: float) -> float:
        return value / max(1, self.steps)

    @property
    def workflow_tasks(self) -> float:  # per step
        return self.per_step(self.events["workflow_task_completed"])

    @property
    def figures(self) -> dict[str, float]:
        return {
            "steps/s": self.steps / self.wall,
            "worker CPU ms/step": self.per_step(self.worker_cpu) * 1000,
            "server CPU ms/step": self.per_step(self.server_cpu) * 1000,
            "events/step": self.per_step(sum(self.events.values())),
            "requests/step": self.per_step(sum(n for op, n in self.requests.items() if op not in OWN_REQUESTS)),
            "actions/step": self.per_step(self.actions),
        }


def start_worker(design: str, address: str, task_queue: str, folder: Path, tool_steps: int, text_bytes: int,
                 model_seconds: float, extra_env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    calls = folder / f"{task_queue}.calls.jsonl"
    env = {**os.environ, **extra_env}
    env.pop("OPENAI_API_KEY", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "bench.throughput_worker", "--design", design, "--address", address,
         "--task-queue", task_queue, "--workspace", str(folder / f"{task_queue}-workspace"),
         "--steps", str(tool_steps + 1), "--text-bytes", str(text_bytes), "--model-seconds", str(model_seconds),
         "--calls-file", str(calls)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=(folder / f"{task_queue}.log").open("w"), text=True,
    )
    assert worker.stdout is not None
    if worker.stdout.readline().strip() != "polling":
        raise RuntimeError(f"the {design} worker did not start; see {folder / f'{task_queue}.log'}")
    return worker, calls


def session_input(design: str, tool_steps: int) -> tuple[str, dict[str, Any]]:
    if design == "delegating":
        return "AgentWorkflow", delegating.root_input(MESSAGE, TOOL, tool_steps)
    if design != "floor":
        return "AgentWorkflow", {"message": MESSAGE, "max_steps": tool_steps + 1, "tools": [TOOL]}
    return "RawLongAgent", {
        "message": MESSAGE, "max_steps": tool_steps + 1, "system": DEFAULT_SYSTEM_PROMPT,
        "tools": [spec.openai_schema() for spec in CATALOG.select([TOOL])],
    }


def done_query(design: str, task_queue: str) -> str:
    if design == "delegating":
        return f"TaskQueue = '{task_queue}' AND HitlState = 'idle' AND {delegating.ROOTS_ONLY}"
    if design != "floor":
        return f"TaskQueue = '{task_queue}' AND HitlState = 'idle'"
    return f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Completed'"


async def start_sessions(client: Client, design: str, task_queue: str, ids: list[str], tool_steps: int) -> None:
    workflow, argument = session_input(design, tool_steps)
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def one(session_id: str) -> None:
        async with gate:
            await client.start_workflow(workflow, argument, id=session_id, task_queue=task_queue)

    await asyncio.gather(*(one(session_id) for session_id in ids))


async def until_done(client: Client, query: str, expected: int, during: Callable[[], None] = lambda: None) -> int:
    """Poll visibility until `expected` sessions are done (or the phase times out); how many were."""
    deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS
    while True:
        during()
        done = (await client.count_workflows(query)).count
        if done >= expected or time.monotonic() > deadline:
            return done
        await asyncio.sleep(POLL_SECONDS)


async def history_figures(client: Client, ids: list[str]) -> tuple[Counter[str], int]:
    """Events by type and estimated billable actions over the sessions' histories."""
    events: Counter[str] = Counter()
    actions = 0
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def one(session_id: str) -> tuple[int, int]:
        async with gate:
            history = await client.get_workflow_handle(session_id).fetch_history()
        billed, tasks_with_local_activities, task = 0, set(), 0
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                task = event.event_id
            elif event.event_type in BILLED_EVENTS:
                billed += 1
            elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and \
                    event.marker_recorded_event_attributes.marker_name == "core_local_activity":
                tasks_with_local_activities.add(task)
        types = Counter(EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower() for event in history.events)
        return types, billed + len(tasks_with_local_activities)

    for types, billed in await asyncio.gather(*(one(session_id) for session_id in ids)):
        events += types
        actions += billed
    return events, actions


def step_overheads(calls_file: Path, measured: set[str]) -> list[float]:
    """Each measured step's time besides the model: the session's next call start less this call's end."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for line in calls_file.read_text().splitlines() if calls_file.exists() else []:
        call = json.loads(line)
        if call["session"] in measured:
            by_session.setdefault(call["session"], []).append(call)
    overheads = []
    for calls in by_session.values():
        first: dict[int, dict[str, Any]] = {}
        for call in sorted(calls, key=lambda c: c["started"]):
            first.setdefault(call["step"], call)  # a retried call counts once: its wait is overhead
        overheads += [first[s + 1]["started"] - c["started"] - c["seconds"] for s, c in first.items() if s + 1 in first]
    return overheads


async def run_phase(client: Client, address: str, server_pid: int, metrics_url: str, folder: Path, design: str,
                    round_no: int, sessions: int, tool_steps: int, text_bytes: int, model_seconds: float,
                    extra_env: dict[str, str]) -> Phase:
    task_queue = f"{design}-{round_no}-{uuid.uuid4().hex[:6]}"
    worker, calls = start_worker(design, address, task_queue, folder, tool_steps, text_bytes, model_seconds, extra_env)
    try:
        query = done_query(design, task_queue)
        warmups = [f"{task_queue}-warm-{n}" for n in range(WARMUP_SESSIONS)]
        await start_sessions(client, design, task_queue, warmups, tool_steps)
        await until_done(client, query, len(warmups))
        ids = [f"{task_queue}-{n:05d}" for n in range(sessions)]
        await asyncio.sleep(METRICS_FLUSH_SECONDS)
        rss_before, peak = rss_mb(worker.pid), [0.0]
        worker_cpu, server_cpu = cpu_seconds(worker.pid), cpu_seconds(server_pid, tree=True)
        requests = server_requests(metrics_url)
        profiler = start_profiler(worker.pid, folder, task_queue)
        began = time.perf_counter()
        await start_sessions(client, design, task_queue, ids, tool_steps)
        done = await until_done(client, query, len(warmups) + sessions,
                                during=lambda: peak.__setitem__(0, max(peak[0], rss_mb(worker.pid))))
        wall = time.perf_counter() - began
        worker_cpu, server_cpu = cpu_seconds(worker.pid) - worker_cpu, cpu_seconds(server_pid, tree=True) - server_cpu
        stop_profiler(profiler)
        await asyncio.sleep(METRICS_FLUSH_SECONDS)
        requests = server_requests(metrics_url) - requests
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    stepping = [delegating.child_of(session_id) for session_id in ids] if design == "delegating" else ids
    events, actions = await history_figures(client, sorted({*ids, *stepping}))
    for operation in BILLED_REQUESTS:
        actions += requests.get(operation, 0)
    return Phase(design, sessions, tool_steps, done - len(warmups), wall, worker_cpu, server_cpu, events, requests,
                 actions, rss_before, max(peak[0], rss_before), step_overheads(calls, set(stepping)))


# ------------------------------------------------------------------ the run and its table


async def run(sessions: int = 40, tool_steps: int = 10, rounds: int = 3, text_bytes: int = 500,
              model_seconds: float = 0.0, designs: tuple[str, ...] = DESIGNS,
              extra_env: dict[str, str] | None = None) -> list[Phase]:
    phases: list[Phase] = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port, metrics_port = free_port(), free_port()
        server = start_dev_server(folder / "temporal.db", port=port, ui_port=free_port(),
                                  extra_args=["--metrics-port", str(metrics_port)])
        try:
            address = f"127.0.0.1:{port}"
            client = await connect_when_ready(address)
            for round_no in range(rounds):
                for design in designs:
                    phases.append(await run_phase(
                        client, address, server.pid, f"http://127.0.0.1:{metrics_port}/metrics", folder, design,
                        round_no, sessions, tool_steps, text_bytes, model_seconds, extra_env or {},
                    ))
        finally:
            stop_dev_server(server)
    return phases


def medians(phases: list[Phase], design: str) -> dict[str, float]:
    mine = [phase.figures for phase in phases if phase.design == design]
    return {name: statistics.median(figures[name] for figures in mine) for name in mine[0]}


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def table(phases: list[Phase], load: str) -> str:
    designs = list(dict.fromkeys(phase.design for phase in phases))
    figures = {design: medians(phases, design) for design in designs}
    names = list(figures[designs[0]])
    header = ["design", *names]
    rows = [header]
    for design in designs:
        row = [design]
        for name in names:
            value = figures[design][name]
            cell = f"{value:.1f}"
            if design == "delegating":
                if "product" in figures and figures["product"][name]:
                    cell += f" (x{value / figures['product'][name]:.2f} product)"
            elif design != "floor" and "floor" in figures and figures["floor"][name]:
                cell += f" (x{value / figures['floor'][name]:.2f})"
            row.append(cell)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    first = phases[0]
    rounds = len(phases) // len(designs)
    notes = [
        "",
        f"{first.sessions} sessions at once, each a turn of {first.tool_steps} tool steps and an answer; one worker "
        f"process per design and round; median of {rounds} alternating rounds; ratios against the floor"
        + (", delegating's against the product." if "delegating" in designs else "."),
        f"load average before / after: {load}",
        f"sessions done per phase: {', '.join(f'{p.design} {p.finished}/{p.sessions}' for p in phases)}",
    ]
    for design in designs:
        mine = [phase for phase in phases if phase.design == design]
        requests = sum((phase.requests for phase in mine), Counter())
        steps = sum(phase.steps for phase in mine)
        top = ", ".join(f"{op} {n / steps:.2f}" for op, n in requests.most_common(8) if op not in OWN_REQUESTS)
        overheads = [o for phase in mine for o in phase.overheads]
        notes.append(f"{design}: requests per step: {top}")
        events = sum((phase.events for phase in mine), Counter())
        sessions = sum(phase.sessions for phase in mine)
        notes.append(f"{design}: events per session: " + ", ".join(f"{kind} {n / sessions:.1f}" for kind, n in events.most_common()))
        notes.append(
            f"{design}: step overhead p50 {percentile(overheads, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(overheads, 0.99) * 1000:.0f} ms; worker RSS "
            f"{statistics.median(p.rss_before_mb for p in mine):.0f} MB before, "
            f"{statistics.median((p.rss_peak_mb - p.rss_before_mb) * 1024 / p.sessions for p in mine):.0f} kB "
            f"more per session at the peak"
        )
    return "\n".join(lines + notes + delegating.each_round(phases))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--tool-steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--text-bytes", type=int, default=500, help="text the model writes each step")
    parser.add_argument("--model-seconds", type=float, default=0.0, help="how long each model call takes")
    parser.add_argument("--designs", nargs="+", choices=CHOICES, default=list(DESIGNS))
    args = parser.parse_args()
    before = load_average()
    phases = asyncio.run(run(args.sessions, args.tool_steps, args.rounds, args.text_bytes, args.model_seconds,
                             tuple(args.designs)))
    print(table(phases, f"{before} / {load_average()}"))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
