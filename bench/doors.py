"""What a decision costs through each door of the API, against the plain API approval, in one run.

    python -m bench.doors [--rounds 3] [--decisions 5] [--think-seconds 2]

Its own dev server (with its Prometheus endpoint), one worker with the offline
model, Slack's and email's channels and an MCP server that asks, and the API
under uvicorn in this process (bench/door_world.py). Each decision is one
session ana starts with `POST /sessions` ("please delete notes.txt": one
approval pause, then `delete_file` and the answer). Once the pause is shown
(and, but for AG-UI and A2A, ana's event stream of the session is open, and the
card or mail the door needs has come), ana thinks `--think-seconds` (not timed: a person reads the card, and the API's
event feed slows to a query a second while nothing happens), then decides
through one door; the clock runs from sending the decision until the door
shows the tool's result:

- api:   `POST /sessions/{id}/calls/{call}/approve` -> `tool_result` on the session's SSE stream;
- ag-ui: `POST /ag-ui` with a `resume` entry -> `TOOL_CALL_RESULT` in that run's stream;
- a2a:   `SendMessage` with the decision's data part -> the task back, `completed`;
- slack: the signed click on the card Slack was sent -> `tool_result` on the SSE stream;
- sub-agent: the session delegates the delete to a child agent (`janitor`), whose pause the
         root lists; `POST .../approve` at the root for the child's call -> the delegation's
         `tool_result` on the root's SSE stream (the child's tool, its answer, the root's pick-up);
- email: `POST` to the Approve link (`{public_url}/decide/<token>`, no token of ana's) of the mail
         the pause sent ana -> `tool_result` on the SSE stream;
- elicitation: "book a table for friday": the MCP server's `book_table` answers input_required
         (a form: name, guests), a question pause; `POST .../answer` with the form's fields ->
         `tool_result` on the SSE stream (the tool retried with the answer).

Beside it, door-independent: the decision to the tool's `ActivityTaskCompleted`
in the history (the server's clock, the same machine's), and per session the
history's events and workflow tasks, and per decision the frontend's requests
(every round trip a client, the API or the worker made while the door's
sessions ran, session start and event stream included). Doors alternate in
each round; each round's median is printed with its ratio to the api's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import quote

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.door_world import BOOKING, MAIL, PERSON, SLACK_USER, World, world
from bench.process_figures import load_average, server_requests
from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from tests.integration.test_sub_agents import JANITOR
from tests.support.api_server import EventStream
from tests.support.mail_server import Inbox, links_in
from tests.support.slack_api import SlackApi, click, signed

DOORS = ("api", "ag-ui", "a2a", "slack", "sub-agent", "email", "elicitation")
BOOKED_FOR = {"name": "Ana", "guests": 3}  # the answer to tests/support/asking_mcp.py's form
MESSAGE = "please delete notes.txt"
DELEGATED = "delegate janitor: delete notes.txt"  # tests/integration/test_sub_agents.py's DelegatingModel
METRICS_FLUSH_SECONDS = 2.0  # the server reports its counters about once a second
WAIT_SECONDS = 120


@dataclass
class Decision:
    door: str
    session_id: str
    tool_session: str  # where the tool ran: the session, or its child agent's
    seconds: float  # the decision sent -> the door showed the tool's result
    tool_seconds: float  # the decision sent -> the tool's activity completed (history)
    events: int = 0
    workflow_tasks: int = 0


@dataclass
class DoorRound:
    door: str
    round_no: int
    decisions: list[Decision] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)

    def median(self, name: str) -> float:
        return statistics.median(getattr(d, name) for d in self.decisions)

    @property
    def requests_per_decision(self) -> float:
        return sum(self.requests.values()) / max(1, len(self.decisions))


async def paused(world: World, door: str) -> tuple[str, str, str]:
    """A new session paused for delete_file: its id, the call's id as the session lists it, and
    the id of the session the tool runs in (a child's, for the sub-agent door)."""
    workspace = world.workspace
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("remember the milk\n")
    session_id = f"door-{uuid.uuid4().hex[:10]}"
    body: dict[str, Any] = {"message": {"sub-agent": DELEGATED, "elicitation": BOOKING}.get(door, MESSAGE)}
    if door == "sub-agent":
        body["agents"] = {"janitor": JANITOR}
    async with world.api.as_(PERSON) as http:
        started = await http.post("/sessions", json={**body, "session_id": session_id})
        pending = started.json().get("pending") if started.status_code == 201 else None
        deadline = time.monotonic() + WAIT_SECONDS
        while started.status_code == 201 and not pending and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # a child's pause reaches the root's list when the child reports it
            pending = (await http.get(f"/sessions/{session_id}/pending")).json()
    if not pending:
        raise RuntimeError(f"the session did not pause: {started.status_code} {started.text}")
    return session_id, pending[0]["call_id"], pending[0].get("session_id") or session_id


async def slack_card(slack: SlackApi, session_id: str, call_id: str) -> dict[str, Any]:
    """The card Slack was sent for the call, as Slack delivered it (its channel and ts); call ids
    repeat across sessions, so the session's id must be on it too."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for call in slack.answered("chat.postMessage"):
            shown = json.dumps(call.arguments.get("blocks"))
            if session_id in shown and call_id in shown and call.answer is not None:
                return {**call.arguments, "channel": call.answer["channel"], "ts": call.answer["ts"]}
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no Slack card for {call_id} within {WAIT_SECONDS} s")


async def sse_tool_result(stream: EventStream, send: Any) -> float:
    """Decide through `send`, then read the open stream until `tool_result`; the seconds between."""
    began = time.perf_counter()
    answer = await send()
    if answer.status_code != 200:
        raise RuntimeError(f"the decision was refused: {answer.status_code} {answer.text}")
    await stream.read_until(lambda seen: any(e["event"] == "tool_result" for e in seen), WAIT_SECONDS)
    return time.perf_counter() - began


async def mailed_link(inbox: Inbox, session_id: str, call_id: str) -> str:
    """The Approve link of the mail ana got for the call (call ids repeat across sessions)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for mail in inbox.to(MAIL):
            if (mail["X-Hitl-Session"], mail["X-Hitl-Call"]) == (session_id, call_id):
                return links_in(mail)["Approve"]
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no mail for {call_id} within {WAIT_SECONDS} s")


async def decision_of(world: World, door: str, session_id: str, call_id: str, http: Any, anonymous: Any
                      ) -> Callable[[], Awaitable[Any]]:
    """The door's decision, ready to send: all it needs (a card, a mail) is there before ana thinks."""
    call = f"/sessions/{session_id}/calls/{quote(call_id, safe='')}"
    if door == "slack":
        body, headers = signed(click(SLACK_USER, await slack_card(world.slack, session_id, call_id), "approve"))
        return lambda: anonymous.post("/channels/slack/interactions", content=body, headers=headers)
    if door == "email":  # the link is the only credential: no token
        link = await mailed_link(world.inbox, session_id, call_id)
        return lambda: anonymous.post(link)
    if door == "elicitation":
        return lambda: http.post(f"{call}/answer", json={"answer": BOOKED_FOR})
    return lambda: http.post(f"{call}/approve", json={})


async def decide_watching(world: World, door: str, session_id: str, call_id: str, think: float) -> tuple[float, float]:
    async with world.api.as_(PERSON) as http, world.api.as_(None) as anonymous, \
            http.stream("GET", f"/sessions/{session_id}/events") as response:
        stream = EventStream(response)
        if door != "sub-agent":  # the root lists its child's pause; its own events do not open it
            await stream.read_until(lambda seen: any(e["event"] == "pause_opened" for e in seen), WAIT_SECONDS)
        send = await decision_of(world, door, session_id, call_id, http, anonymous)
        await asyncio.sleep(think)
        sent = time.time()
        seconds = await sse_tool_result(stream, send)
    return seconds, sent


async def decide_by_ag_ui(world: World, session_id: str, call_id: str, think: float) -> tuple[float, float]:
    await asyncio.sleep(think)
    body = {"threadId": session_id, "runId": uuid.uuid4().hex, "messages": [],
            "resume": [{"interruptId": call_id, "status": "resolved", "payload": {"decision": "approve"}}]}
    sent, began = time.time(), time.perf_counter()
    async with world.api.as_(PERSON) as http, http.stream("POST", "/ag-ui", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:") and json.loads(line[5:])["type"] in ("TOOL_CALL_RESULT", "RUN_ERROR"):
                if json.loads(line[5:])["type"] == "RUN_ERROR":
                    raise RuntimeError(f"the AG-UI resume failed: {line}")
                return time.perf_counter() - began, sent
    raise RuntimeError("the AG-UI run ended without TOOL_CALL_RESULT")


async def decide_by_a2a(world: World, session_id: str, call_id: str, think: float) -> tuple[float, float]:
    from a2a.helpers.proto_helpers import new_data_part

    await asyncio.sleep(think)
    sent, began = time.time(), time.perf_counter()
    task = await world.a2a.send(new_data_part({"call_id": call_id, "decision": "approve"}), task_id=session_id)
    seconds = time.perf_counter() - began
    if task.status.state != 3:  # TASK_STATE_COMPLETED
        raise RuntimeError(f"the A2A decision did not complete the task: {task.status}")
    return seconds, sent


async def one_decision(world: World, door: str, think: float) -> Decision:
    session_id, call_id, tool_session = await paused(world, door)
    if door not in ("ag-ui", "a2a"):
        seconds, sent = await decide_watching(world, door, session_id, call_id, think)
    elif door == "ag-ui":
        seconds, sent = await decide_by_ag_ui(world, session_id, call_id, think)
    else:
        seconds, sent = await decide_by_a2a(world, session_id, call_id, think)
    decision = Decision(door, session_id, tool_session, seconds, float("nan"))
    await settle_history(world.client, decision, sent)
    async with world.api.as_(PERSON) as http:  # a person may own only so many running sessions
        cancelled = await http.post(f"/sessions/{session_id}/cancel", json={})
    if cancelled.status_code != 200:
        raise RuntimeError(f"the session could not be cancelled: {cancelled.status_code} {cancelled.text}")
    return decision


async def settle_history(client: Client, decision: Decision, sent: float) -> None:
    """Once the turn has answered: its events and workflow tasks (a child's too) and when the tool
    completed."""
    handle = client.get_workflow_handle(decision.session_id)
    deadline = time.monotonic() + WAIT_SECONDS
    while (await handle.query("status"))["state"] != "idle" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    events = list((await handle.fetch_history()).events)
    ran_in = events
    if decision.tool_session != decision.session_id:
        ran_in = list((await client.get_workflow_handle(decision.tool_session).fetch_history()).events)
        events += ran_in
    tools = {e.event_id for e in ran_in if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
             and e.activity_task_scheduled_event_attributes.activity_type.name == "run_tool"}
    [done] = [e for e in ran_in if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
              and e.activity_task_completed_event_attributes.scheduled_event_id in tools]  # a question fails the first run
    decision.tool_seconds = done.event_time.ToDatetime().timestamp() - sent
    decision.events = len(events)
    decision.workflow_tasks = sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events)


async def run(rounds: int = 3, decisions: int = 5, think: float = 2.0, doors: tuple[str, ...] = DOORS) -> list[DoorRound]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port, metrics_port = free_port(), free_port()
        server = start_dev_server(folder / "temporal.db", port=port, ui_port=free_port(),
                                  extra_args=["--metrics-port", str(metrics_port)])
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        try:
            client = await connect_when_ready(f"127.0.0.1:{port}")
            async with AsyncExitStack() as stack:
                here = await world(client, folder, stack)
                for door in doors:  # warm up: first-use imports and caches are not the steady state
                    await one_decision(here, door, 0)
                measured: list[DoorRound] = []
                for round_no in range(rounds):
                    for door in doors:
                        measured.append(await door_round(here, metrics, door, round_no, decisions, think))
                return measured
        finally:
            stop_dev_server(server)


async def door_round(world: World, metrics: str, door: str, round_no: int, decisions: int, think: float) -> DoorRound:
    await asyncio.sleep(METRICS_FLUSH_SECONDS)
    before = server_requests(metrics)
    measured = DoorRound(door, round_no, [await one_decision(world, door, think) for _ in range(decisions)])
    await asyncio.sleep(METRICS_FLUSH_SECONDS)
    measured.requests = server_requests(metrics) - before
    return measured


def table(rounds: list[DoorRound], think: float, load: str) -> str:
    doors = list(dict.fromkeys(r.door for r in rounds))
    lines = [f"{'door':<12}{'round':>6}{'to tool result ms':>19}{'vs api':>8}{'to tool done ms':>17}{'vs api':>8}"
             f"{'events':>8}{'wf tasks':>10}{'requests':>10}"]
    for door in doors:
        for mine in (r for r in rounds if r.door == door):
            [api] = [r for r in rounds if r.door == "api" and r.round_no == mine.round_no] or [mine]
            lines.append(
                f"{door:<12}{mine.round_no + 1:>6}{mine.median('seconds') * 1000:>19.0f}"
                f"{mine.median('seconds') / api.median('seconds'):>8.2f}{mine.median('tool_seconds') * 1000:>17.0f}"
                f"{mine.median('tool_seconds') / api.median('tool_seconds'):>8.2f}{mine.median('events'):>8.0f}"
                f"{mine.median('workflow_tasks'):>10.0f}{mine.requests_per_decision:>10.1f}")
    count = len(rounds[0].decisions)
    lines += ["", f"each row the median of {count} decisions (one session each, a child's too for sub-agent: start, "
              "pause, approve, delete_file, answer; elicitation's: start, book_table asks, the answer, book_table "
              f"again, answer); {think:g} s of thought before each, not timed; ratios against the api row of the same round;",
              "events and workflow tasks per session; requests: the server frontend's round trips per decision "
              "(session start and event stream included)",
              f"load average before / after: {load}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decisions", type=int, default=5, help="decisions per door and round")
    parser.add_argument("--think-seconds", type=float, default=2.0, help="a person's pause before deciding, not timed")
    parser.add_argument("--doors", nargs="+", choices=DOORS, default=list(DOORS))
    args = parser.parse_args()
    before = load_average()
    rounds = asyncio.run(run(args.rounds, args.decisions, args.think_seconds, tuple(args.doors)))
    print(table(rounds, args.think_seconds, f"{before} / {load_average()}"))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
