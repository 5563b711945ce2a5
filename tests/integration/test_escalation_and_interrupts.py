"""Pauses that call for people over hours, and messages that interrupt a model mid-thought."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

from temporalio.testing import WorkflowEnvironment

from activities.notify import read_notifications
from activities.offline_model import OfflineModel
from tests.support.sessions import Agent, GatedModel, assert_well_formed, eventually, fast_forward, pending_items, query, settled
from hitl.worker import build_worker


async def test_a_pause_notifies_reminds_escalates_and_finally_times_out(
    skipping_env: WorkflowEnvironment, skipping_agent: Agent
) -> None:
    with skipping_env.with_time_skipping_disabled():
        session = await skipping_agent.start(
            "please delete notes.txt", approvers={"delete_file": ["oncall-1"]},
            remind_after_seconds=600, escalate_after_seconds=3600, escalate_to=["lead"],
            approval_timeout_seconds=7200,
        )
    [item] = await pending_items(session)
    events = await eventually(lambda: asyncio.sleep(0, read_notifications(skipping_agent.workspace)), bool)
    assert events[0]["event"] == "requested" and events[0]["to"] == ["oncall-1"]
    assert events[0]["item"]["call_id"] == item["call_id"]

    await fast_forward(skipping_env, session, 3700)  # an hour on: reminded every 10 minutes, then escalated
    [escalated] = await query(session, "pending")
    assert escalated["approvers"] == ["oncall-1", "lead"]
    events = await eventually(
        lambda: asyncio.sleep(0, read_notifications(skipping_agent.workspace)),
        lambda found: any(e["event"] == "escalated" for e in found),
    )
    kinds = [e["event"] for e in events]
    assert kinds.count("reminder") == 6 and kinds.index("escalated") > kinds.index("reminder")
    assert next(e for e in events if e["event"] == "escalated")["to"] == ["lead"]

    await fast_forward(skipping_env, session, 3600)  # past the two-hour timeout: the fallback stays last
    status = await eventually(lambda: query(session, "status"), lambda s: s["state"] == "idle")
    assert "No answer within 7200 seconds" in status["last_answer"]
    assert (skipping_agent.workspace / "notes.txt").exists()


async def test_the_lead_can_approve_once_escalated(skipping_env: WorkflowEnvironment, skipping_agent: Agent) -> None:
    with skipping_env.with_time_skipping_disabled():
        session = await skipping_agent.start(
            "please delete notes.txt", approvers={"delete_file": ["oncall-1"]},
            escalate_after_seconds=60, escalate_to=["lead"],
        )
    await pending_items(session)
    await session.signal("approve", {"by": "lead"})
    status = await eventually(lambda: query(session, "status"), lambda s: bool(s["ignored_signals"]))
    assert "lead may not decide delete_file" in status["ignored_signals"][0]["reason"]

    await fast_forward(skipping_env, session, 61)
    await session.execute_update("approve_update", {"by": "lead"})
    await settled(session)
    assert not (skipping_agent.workspace / "notes.txt").exists()


async def test_an_unreviewed_result_is_withheld_after_the_timeout(skipping_agent: Agent) -> None:
    session = await skipping_agent.start(
        "draft an email to ana@example.com about lunch saying noon", approval_timeout_seconds=3600
    )
    # Not caught while open: time skips as soon as the session waits on its deadline alone.
    await session.result()
    transcript = await query(session, "transcript")
    tool = next(m for m in transcript if m["role"] == "tool")
    assert tool["content"] == "No answer within 3600 seconds; the result was withheld from you."
    assert_well_formed(transcript)


async def test_an_interrupting_message_cancels_the_model_call_and_replans(gated_agent: tuple[Agent, GatedModel]) -> None:
    agent, model = gated_agent
    session = await agent.start("search for milk")
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 1)

    receipt = await session.execute_update(
        "user_message_update", {"text": "no, delete notes.txt instead", "interrupt": True}
    )
    assert receipt["interrupting"] is True
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 2)
    # The first call hears of its cancellation through its heartbeat, while the second one runs.
    await eventually(lambda: asyncio.sleep(0, model.cancelled), lambda n: n == 1, timeout=60)
    model.gate.set()

    [item] = await pending_items(session)
    assert item["tool"] == "delete_file"
    transcript = await query(session, "transcript")
    assert [(m["role"], m.get("content")) for m in transcript[:2]] == [
        ("user", "search for milk"), ("user", "no, delete notes.txt instead")]
    assert (await query(session, "status"))["turn"] == 1


async def test_without_interrupt_a_message_waits_for_the_step_boundary(gated_agent: tuple[Agent, GatedModel]) -> None:
    agent, model = gated_agent
    session = await agent.start("search for milk")
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 1)
    receipt = await session.execute_update("user_message_update", {"text": "then delete notes.txt"})
    assert receipt["interrupting"] is False
    model.gate.set()
    await pending_items(session)
    roles = [m["role"] for m in await query(session, "transcript")]
    assert roles[:4] == ["user", "assistant", "tool", "user"]
    assert model.cancelled == 0


@contextmanager
def webhook(delay_seconds: float = 0.0) -> Iterator[tuple[str, list[dict]]]:
    """A loopback HTTP endpoint that records each notification it is sent, after `delay_seconds`."""
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            time.sleep(delay_seconds)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


async def test_notifications_go_to_a_webhook_when_one_is_set(env: WorkflowEnvironment, workspace: Path) -> None:
    with webhook() as (url, received):
        async with build_worker(env.client, "webhook-queue", OfflineModel(), workspace, notify_url=url):
            session = await Agent(env.client, "webhook-queue", workspace).start("please delete notes.txt")
            [item] = await pending_items(session)
            [hook] = await eventually(lambda: asyncio.sleep(0, list(received)), bool)
            await session.signal("cancel", {})
            await session.result()
    assert hook["event"] == "requested" and hook["session_id"] == session.id
    assert hook["item"]["call_id"] == item["call_id"]
    assert not (workspace / "notifications.jsonl").exists()


async def test_a_session_closes_only_after_its_notifications_were_sent(env: WorkflowEnvironment, workspace: Path) -> None:
    """A notification still in flight when the session closes used to race the closing
    workflow task: when it completed during that task, Temporal failed the task and
    aborted the person's cancel Update with "unexpected workflow task failure"."""
    with webhook(delay_seconds=1.5) as (url, _):
        async with build_worker(env.client, "slow-webhook-queue", OfflineModel(), workspace, notify_url=url):
            session = await Agent(env.client, "slow-webhook-queue", workspace).start("please delete notes.txt")
            await pending_items(session)
            await session.execute_update("cancel_update", {"reason": "stop"})
            await session.result()
            history = await session.fetch_history()
    scheduled = {e.event_id for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
                 and e.activity_task_scheduled_event_attributes.activity_type.name == "notify"}
    finished = {attributes.scheduled_event_id for e in history.events for attributes in (
        e.activity_task_completed_event_attributes, e.activity_task_failed_event_attributes,
        e.activity_task_timed_out_event_attributes) if attributes.scheduled_event_id}
    assert scheduled and scheduled <= finished, "the session closed with a notification still being sent"


async def test_a_message_sent_as_a_turn_ends_is_waited_for_to_its_own_outcome(gated_agent: tuple[Agent, GatedModel]) -> None:
    """POST .../messages with `wait` (and A2A's message) waits with `wait_until_settled`: a message
    that arrives while the turn before it is still ending is queued, and the wait answers with that
    message's outcome, not with the end of the turn before it."""
    agent, model = gated_agent
    model.free_calls = 1  # the first plan is free; the answer to the rejection waits at the gate
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)
    await session.execute_update("reject_update", {"call_id": item["call_id"], "reason": "keep it", "by": "ana"})
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 2)  # the turn is ending
    receipt = await session.execute_update("user_message_update", {"text": "please delete menu.txt"})
    waiting = asyncio.ensure_future(session.execute_update("wait_until_settled", {"after_event": receipt["event"]}))
    model.gate.set()
    settled_after = await waiting
    assert settled_after["status"]["state"] == "awaiting_human", settled_after["status"]
    assert [p["args"] for p in settled_after["pending"]] == [{"path": "menu.txt"}]
