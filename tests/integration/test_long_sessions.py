"""Sessions of any length: history grows with new content only, and Temporal never ends one.

A model that writes 5 KB a step used to make a turn's history grow with the
square of its length (the whole conversation was the input of every model
call) until the server terminated the session at 50 MB. These stories run the
long turns through a real dev server and measure the history over every run.
"""

from __future__ import annotations

import asyncio
import os

from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.tools import tool
from tests.support.scripted_model import LongTurnModel, fingerprint
from hitl.client.sessions import measure_history, read_all
from tests.support.sessions import Agent, assert_well_formed, eventually, pending_items, query, running_agent, settled
from workflows.conversation import ChatMessage, placeholder



@tool
def bulky_lookup(step: int) -> str:
    """Look something up and return a 20 KB report (for the long-session tests)."""
    return f"report {step}: " + "r" * 20_000


def assert_model_saw_the_transcript(model: LongTurnModel, transcript: list[dict]) -> None:
    """Message for message, each request was the transcript up to that point: each message
    whole, or in its place a note of the same call with its text trimmed, or left out and counted."""
    whole = [fingerprint(m) for m in transcript]
    trimmed = [fingerprint(placeholder(ChatMessage.model_validate(m)).to_openai()) for m in transcript]
    for omitted, sent in model.seen:
        for index, seen in enumerate(sent, start=omitted):
            assert seen in (whole[index], trimmed[index]), f"message {index} differs from the transcript"
    omitted, sent = model.seen[-1]
    assert omitted + len(sent) == len(transcript) - 1, "the last request was the whole transcript before the answer"
    assert sent[-3:] == whole[-4:-1], "the newest messages reach the model whole"


async def long_turn(agent: Agent, model: LongTurnModel, **options: object) -> tuple[str, dict]:
    session = await agent.start("work through the long task", max_steps=1000, **options)
    status = await eventually(lambda: query(agent.client.get_workflow_handle(session.id), "status"),
                              lambda s: s["state"] == "idle", timeout=600)
    return session.id, status


@pytest.fixture
async def model_for(env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[Callable[[LongTurnModel], Awaitable[Agent]]]:
    """Start a worker whose model is the given scripted one; stopped when the test ends."""
    runners: list[AsyncIterator[Agent]] = []

    async def start(model: LongTurnModel) -> Agent:
        runners.append(running_agent(env.client, workspace, model))
        return await runners[-1].__anext__()

    yield start
    for runner in runners:
        async for _ in runner:
            pass


async def test_a_120_step_turn_writing_5_kb_a_step_stays_under_2_mb_of_history(model_for: Callable[[LongTurnModel], Awaitable[Agent]]) -> None:
    model = LongTurnModel(steps=120, text_bytes=5_000)
    agent = await model_for(model)
    session_id, status = await long_turn(agent, model)

    assert status["error"] is None and status["last_answer"].startswith("step 120: finished")
    measured = await measure_history(agent.client, session_id)
    new_content = 120 * 5_000
    print(f"\n120 steps x 5 KB: {measured}; {measured.bytes / 120:.0f} bytes a step for 5,000 new")
    assert measured.bytes < 2_000_000
    assert (measured.bytes - new_content) / 120 < 2_048, "at most 2 KB a step besides what is new"


async def test_a_300_step_turn_writing_5_kb_a_step_ends_idle_and_the_transcript_is_what_the_model_saw(model_for: Callable[[LongTurnModel], Awaitable[Agent]]) -> None:
    model = LongTurnModel(steps=300, text_bytes=5_000)
    agent = await model_for(model)
    session_id, status = await long_turn(agent, model)

    assert status["error"] is None and status["last_answer"].startswith("step 300: finished")
    transcript = await read_all(agent.client, session_id, "transcript_page", "messages")
    assert len(transcript) == 1 + 2 * 299 + 1
    assert_well_formed(transcript)
    assert_model_saw_the_transcript(model, transcript)


async def test_a_1000_step_turn_with_20_kb_tool_results_continues_as_new_and_ends_idle(model_for: Callable[[LongTurnModel], Awaitable[Agent]]) -> None:
    model = LongTurnModel(steps=1000, text_bytes=200, tool_name="bulky_lookup")
    agent = await model_for(model)
    session_id, status = await long_turn(agent, model)

    assert status["error"] is None and status["last_answer"].startswith("step 1000: finished")
    measured = await measure_history(agent.client, session_id)
    print(f"\n1,000 steps x 20 KB results: {measured}")
    assert measured.runs >= 2, "a turn this long hands over to new runs on the way"
    assert measured.largest_run_bytes < 20_000_000 and measured.largest_run_events < 40_000
    transcript = await read_all(agent.client, session_id, "transcript_page", "messages")
    assert len(transcript) == 1 + 2 * 999 + 1
    assert_well_formed(transcript)
    assert_model_saw_the_transcript(model, transcript)
    audit = await read_all(agent.client, session_id, "audit_page", "events")
    # no call needed a person; each ran unasked, audited with the rule that let it, across every run
    assert len(audit) == 999 and {e["event"] for e in audit} == {"auto_approved"}
    assert [e["call_id"] for e in audit] == [m["tool_call_id"] for m in transcript if m["role"] == "tool"]


async def test_messages_sent_while_the_session_hands_over_are_all_taken_in(agent: Agent) -> None:
    session = await agent.start("search for invoices", continue_as_new_after_events=20)
    await settled(session)
    texts = [f"search for note {n}" for n in range(40)]
    for batch in range(0, len(texts), 8):
        await asyncio.gather(*(session.signal("user_message", {"text": t}) for t in texts[batch : batch + 8]))
    latest = agent.client.get_workflow_handle(session.id)
    await eventually(lambda: query(latest, "status"),
                     lambda s: s["state"] == "idle" and s["queued_messages"] == 0 and s["transcript_messages"] > 40,
                     timeout=120)
    await settled(latest)
    transcript = await read_all(agent.client, session.id, "transcript_page", "messages")
    users = [m["content"] for m in transcript if m["role"] == "user"]
    assert sorted(users[1:]) == sorted(texts), "every message sent during the hand-overs is in the transcript"
    assert (await measure_history(agent.client, session.id)).runs > 2
    assert_well_formed(transcript)


# Each timer takes the time-skipping dev server about a second, so a week of minute
# reminders (10,080) takes hours: CI waits through PAUSE_MINUTES of them with a small
# event budget, which hands over just as often per event; HITL_PAUSE_MINUTES=10080 runs the week.
PAUSE_MINUTES = int(os.environ.get("HITL_PAUSE_MINUTES", "40"))


async def test_a_long_pause_with_minute_reminders_hands_over_while_it_waits_and_is_decided_at_the_end(
    skipping_agent: Agent,
) -> None:
    session = await skipping_agent.start(
        # The deadline is far: the skipping server also jumps ahead while a run hands over.
        "please delete notes.txt", remind_after_seconds=60, approval_timeout_seconds=30 * 86400,
        continue_as_new_after_events=100 if PAUSE_MINUTES < 1000 else 10_000,
    )
    [item] = await pending_items(session)
    # Time skips while the session only waits: the reminders pass, across several runs.
    reminders = await eventually(lambda: reminders_sent(skipping_agent.workspace),
                                 lambda sent: sent >= PAUSE_MINUTES, timeout=30 + 3 * PAUSE_MINUTES, every=1.0)
    latest = skipping_agent.client.get_workflow_handle(session.id)
    [still] = await pending_items(latest)
    assert still["call_id"] == item["call_id"] and still["requested_at"] == item["requested_at"]
    result = await latest.execute_update("approve_update", {"call_id": item["call_id"], "by": "ana"})
    assert result["outcome"] == "approved"
    status = await settled(latest)
    assert status["last_answer"] == "Deleted notes.txt." and not (skipping_agent.workspace / "notes.txt").exists()
    measured = await measure_history(skipping_agent.client, session.id)
    print(f"\n{reminders} minute reminders while paused: {measured}")
    assert measured.runs >= 3 and measured.largest_run_events < 51_200
    assert_well_formed(await read_all(skipping_agent.client, session.id, "transcript_page", "messages"))
    events = [e["event"] for e in await read_all(skipping_agent.client, session.id, "audit_page", "events")]
    assert events == ["requested", "approved"]


async def reminders_sent(workspace: Path) -> int:
    path = workspace / "notifications.jsonl"
    return path.read_text().count('"event":"reminder"') if path.exists() else 0
