"""What a long turn stores, and what each step costs besides the model: the product against the raw floor.

    python -m bench.history [--sizes 10 100 1000] [--text-bytes 5000]

One turn per size and design, on its own worker, with a scripted model that
writes `text_bytes` of text and calls `search_web` on every step:

- product:   AgentWorkflow; the model activity gets a reference and reads the
             conversation through the `model_context` query;
- raw floor: `RawLongAgent`, each model activity's input being the whole
             request (the design every other agent integration on Temporal uses).

History is summed over every run of a session (hitl/client/sessions.py, measure_history:
a session that continued as new has several). New content is what the turn's
messages weigh, encoded. A raw turn that Temporal ends (50 MB of history) is
reported as it ended, with the step it reached.

The overhead of a step is its wall time (one model call's start to the next's)
minus the model's own time, the median over the steps nearest 10, 100, 1,000
of each design's longest turn: it must not grow with the conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

from activities.tools import CATALOG
from bench.own_server import own_dev_server
from bench.raw_agent import RawLongAgent
from tests.support.scripted_model import LongTurnModel, ModelCall
from hitl.client.sessions import measure_history, read_all
from hitl.worker import build_worker
from workflows.agent import AgentWorkflow
from workflows.contract import STATUS, TRANSCRIPT_PAGE
from workflows.conversation import ChatMessage, Conversation
from workflows.limits import json_size
from workflows.requests import ModelRequest
from workflows.session import DEFAULT_SYSTEM_PROMPT

TEXT_BYTES = 5_000
SIZES = (10, 100, 1_000)
PROBE_SAMPLES = 51  # steps whose overhead makes one median (fewer near the start of a turn)
TURN_TIMEOUT_SECONDS = 3_600
MESSAGE = "work through the long task"


@dataclass
class LongTurn:
    """One turn of `steps` steps asked, as measured after it ended."""

    design: str
    steps: int
    reached: int
    outcome: str
    runs: int
    events: int
    history_bytes: int
    new_content_bytes: int
    calls: list[ModelCall] = field(default_factory=list, repr=False)
    transcript_read_seconds: float | None = None

    @property
    def bytes_per_step(self) -> float:
        return self.history_bytes / max(1, self.reached)

    @property
    def new_per_step(self) -> float:
        return self.new_content_bytes / max(1, self.reached)


@dataclass(frozen=True)
class Overhead:
    """Median wall time of a step besides the model's own, over `samples` steps near `step`."""

    step: int
    median_ms: float
    samples: int


def step_overheads(calls: list[ModelCall]) -> dict[int, float]:
    """Seconds each step took besides the model: the next call's start minus this call's start and duration.

    A retried call counts once (its first attempt), so a retry's wait shows as overhead, as it should.
    """
    first: dict[int, ModelCall] = {}
    for call in calls:
        first.setdefault(call.step, call)
    return {
        step: first[step + 1].started - call.started - call.seconds
        for step, call in first.items() if step + 1 in first
    }


def slowest_step(calls: list[ModelCall]) -> tuple[int, float] | None:
    """The step that took longest besides the model (a hand-over or a retried task shows here)."""
    overheads = step_overheads(calls)
    return max(overheads.items(), key=lambda item: item[1]) if overheads else None


def overhead_near(calls: list[ModelCall], step: int) -> Overhead | None:
    """The median over the PROBE_SAMPLES steps nearest `step` (at most step+1 of them, so
    "near step 10" means steps 5 to 15); None when the turn never got that far."""
    overheads = step_overheads(calls)
    if not overheads or max(overheads) < step * 0.95:
        return None
    nearest = sorted(overheads, key=lambda s: (abs(s - step), s))[: min(PROBE_SAMPLES, step + 1)]
    return Overhead(step, statistics.median(overheads[s] for s in nearest) * 1000, len(nearest))


# ------------------------------------------------------------------ product


async def product_turn(client: Client, workspace: Path, steps: int, text_bytes: int) -> LongTurn:
    model = LongTurnModel(steps, text_bytes, remember_requests=False)
    task_queue = f"bench-long-{uuid.uuid4().hex[:8]}"
    session_id = f"long-{steps}-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, task_queue, model, workspace):
        await client.start_workflow(
            AgentWorkflow.run, {"message": MESSAGE, "max_steps": steps}, id=session_id, task_queue=task_queue,
        )
        status = await until_idle(client, session_id)
        began = time.perf_counter()  # a page held by an earlier, closed run is read by replaying that run
        transcript = await read_all(client, session_id, TRANSCRIPT_PAGE.name, "messages")  # queries need the worker
        read_seconds = time.perf_counter() - began
    measured = await measure_history(client, session_id)
    outcome = "idle" if status["error"] is None else f"{status['state']}, error: {status['error']}"
    return LongTurn(
        "product", steps, len({call.step for call in model.calls}), outcome, measured.runs, measured.events,
        measured.bytes, sum(json_size(m) for m in transcript), model.calls, read_seconds,
    )


async def until_idle(client: Client, session_id: str) -> dict[str, Any]:
    """Poll the newest run's status (once a second: queries run on the worker, and cost it time)."""
    deadline = time.monotonic() + TURN_TIMEOUT_SECONDS
    while True:
        status = await client.get_workflow_handle(session_id).query(STATUS.name)
        if status["state"] in ("idle", "closed"):
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"{session_id} still {status['state']} after {TURN_TIMEOUT_SECONDS} s")
        await asyncio.sleep(1.0)


# ------------------------------------------------------------------ raw floor


class RawLongActivities:
    """The raw floor's model and tool: the same script and the same tool text as the product's."""

    def __init__(self, model: LongTurnModel) -> None:
        self.model = model
        self.conversation_bytes = 0

    @activity.defn(name="raw_long_model")
    async def call_model(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = [ChatMessage(role="system", content=request["system"])]
        messages += [ChatMessage.model_validate(m) for m in request["messages"]]
        reply = await self.model.complete(ModelRequest(messages=messages, tools=request["tools"]))
        answer = Conversation.assistant_message(reply).to_openai()
        self.conversation_bytes = sum(json_size(m) for m in request["messages"]) + json_size(answer)
        return answer

    @activity.defn(name="raw_long_tool")
    async def run_tool(self, call: dict[str, Any]) -> str:
        query = json.loads(call["function"]["arguments"])["query"]
        return f"No documents in the workspace mention {query!r}."  # what search_web says in an empty workspace


async def raw_turn(client: Client, steps: int, text_bytes: int) -> LongTurn:
    model = LongTurnModel(steps, text_bytes, remember_requests=False)
    activities = RawLongActivities(model)
    task_queue = f"bench-raw-long-{uuid.uuid4().hex[:8]}"
    session_id = f"raw-long-{steps}-{uuid.uuid4().hex[:8]}"
    request = {
        "message": MESSAGE, "max_steps": steps, "system": DEFAULT_SYSTEM_PROMPT,
        "tools": [spec.openai_schema() for spec in CATALOG.select(None)],
    }
    async with Worker(client, task_queue=task_queue, workflows=[RawLongAgent],
                      activities=[activities.call_model, activities.run_tool]):
        handle = await client.start_workflow(RawLongAgent.run, request, id=session_id, task_queue=task_queue)
        try:
            await asyncio.wait_for(handle.result(), TURN_TIMEOUT_SECONDS)
            outcome = "completed"
        except WorkflowFailureError:
            outcome = await how_it_ended(client, session_id)
    measured = await measure_history(client, session_id)
    if outcome != "completed":
        outcome += f" at {measured.bytes / 1e6:.1f} MB"
    return LongTurn(
        "raw floor", steps, len({call.step for call in model.calls}), outcome,
        measured.runs, measured.events, measured.bytes, activities.conversation_bytes, model.calls,
    )


async def how_it_ended(client: Client, session_id: str) -> str:
    """The closing event's own words: the server's reason when it terminated the run."""
    handle = client.get_workflow_handle(session_id)
    description = await handle.describe()
    status = description.status.name.lower() if description.status else "unknown"
    history = await handle.fetch_history()
    last = history.events[-1]
    if last.HasField("workflow_execution_terminated_event_attributes"):
        return f"{status}: {last.workflow_execution_terminated_event_attributes.reason.rstrip('.')}"
    if last.HasField("workflow_execution_failed_event_attributes"):
        return f"{status}: {last.workflow_execution_failed_event_attributes.failure.message}"
    return status


# ------------------------------------------------------------------ both, one table


async def compare_long_turns(client: Client, workspace: Path, sizes: tuple[int, ...] = SIZES,
                             text_bytes: int = TEXT_BYTES) -> list[LongTurn]:
    """Every size for the product, then for the raw floor, one turn at a time on this machine."""
    turns = [await product_turn(client, workspace, steps, text_bytes) for steps in sizes]
    turns += [await raw_turn(client, steps, text_bytes) for steps in sizes]
    return turns


def overheads_by_design(turns: list[LongTurn], probes: tuple[int, ...]) -> dict[str, dict[int, Overhead | None]]:
    """Each design's overhead at every probe step, from its longest turn."""
    result: dict[str, dict[int, Overhead | None]] = {}
    for design in dict.fromkeys(t.design for t in turns):
        longest = max((t for t in turns if t.design == design), key=lambda t: t.steps)
        result[design] = {probe: overhead_near(longest.calls, probe) for probe in probes}
    return result


def table(turns: list[LongTurn], text_bytes: int) -> str:
    probes = tuple(sorted({t.steps for t in turns}))
    overheads = overheads_by_design(turns, probes)
    header = ("design", "steps", "reached", "runs", "events", "history", "bytes/step", "new/step", "x new",
              "overhead ms", "x first", "slowest step", "read transcript", "outcome")
    rows: list[tuple[str, ...]] = [header]
    for turn in turns:
        mine = overheads[turn.design]
        at, first, slowest = mine.get(turn.steps), mine.get(probes[0]), slowest_step(turn.calls)
        if at is None and turn.reached < turn.steps:  # ended early: its last steps, labelled as such
            at = overhead_near(turn.calls, turn.reached - 1)
        rows.append((
            turn.design, f"{turn.steps:,}", f"{turn.reached:,}", str(turn.runs), f"{turn.events:,}",
            f"{turn.history_bytes / 1e6:.2f} MB", f"{turn.bytes_per_step:,.0f}", f"{turn.new_per_step:,.0f}",
            f"{turn.bytes_per_step / max(1.0, turn.new_per_step):.1f}",
            (f"{at.median_ms:.1f} (n={at.samples})" + (f" @{at.step}" if at.step != turn.steps else "")) if at else "-",
            f"{at.median_ms / first.median_ms:.2f}" if at and first and first.median_ms > 0 else "-",
            f"{slowest[1]:.2f} s (#{slowest[0]})" if slowest else "-",
            f"{turn.transcript_read_seconds:.1f} s" if turn.transcript_read_seconds is not None else "-",
            turn.outcome,
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    model_ms = statistics.median(c.seconds for t in turns for c in t.calls) * 1000 if any(t.calls for t in turns) else 0.0
    notes = [
        f"A scripted model writes {text_bytes:,} bytes of text and calls search_web every step.",
        "history: serialized events summed over every run of the session (continue-as-new makes several).",
        "new/step: the turn's messages, JSON-encoded, per step reached; x new = bytes/step / new/step.",
        f"overhead ms: a step's wall time minus the model's own (median {model_ms:.2f} ms), median over the",
        "  steps nearest `steps` in the design's longest turn; x first = against the first probe step.",
        "slowest step: the turn's longest step besides the model, and which step it was.",
        "read transcript: reading the whole transcript back (transcript_page, every run) once the turn ended.",
    ]
    return "\n".join(lines + [""] + notes)


async def run(sizes: tuple[int, ...], text_bytes: int) -> str:
    async with own_dev_server() as (client, _, folder):
        turns = await compare_long_turns(client, folder / "workspace", sizes, text_bytes)
    return table(turns, text_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--text-bytes", type=int, default=TEXT_BYTES)
    args = parser.parse_args()
    print(asyncio.run(run(tuple(args.sizes), args.text_bytes)))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
