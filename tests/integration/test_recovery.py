"""People change their minds: new messages, steering, cancelling. The transcript stays well-formed."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError

from tests.support.sessions import PATIENCE, Agent, GatedModel, assert_well_formed, eventually, pending_items, settled


async def test_a_message_while_a_call_is_pending_settles_it_first(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)

    await session.signal("user_message", {"text": "search for milk"})

    status = await eventually(
        lambda: session.query("status"), lambda s: s["state"] == "idle" and "milk" in (s["last_answer"] or "")
    )
    assert (agent.workspace / "notes.txt").exists()
    transcript = await session.query("transcript")
    assert_well_formed(transcript)
    moved_on = next(m for m in transcript if m.get("tool_call_id") == item["call_id"])
    assert "moved on" in moved_on["content"] and "did not run" in moved_on["content"]
    assert "notes.txt" in status["last_answer"]  # the search found the note
    assert await session.query("pending") == []
    audit = await session.query("audit")
    # the deletion settled as moved on; the search ran unasked, audited with the rule that let it
    assert [(event["event"], event["tool"]) for event in audit] == [
        ("requested", "delete_file"), ("cancelled", "delete_file"), ("auto_approved", "search_web")]
    assert "moved on" in audit[1]["reason"]


async def test_steering_joins_the_running_turn_at_the_next_step(gated_agent: tuple[Agent, GatedModel]) -> None:
    agent, model = gated_agent
    session = await agent.start("search for milk")
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 1)

    await session.signal("user_message", {"text": "actually, delete notes.txt"})
    model.gate.set()

    [item] = await pending_items(session)
    assert item["tool"] == "delete_file"
    status = await session.query("status")
    assert status["turn"] == 1, "the steering message joined the running turn"
    roles = [(m["role"], m.get("content")) for m in await session.query("transcript")]
    assert roles[0] == ("user", "search for milk")
    assert [r for r, _ in roles[1:4]] == ["assistant", "tool", "user"]
    assert roles[3] == ("user", "actually, delete notes.txt")


async def test_cancel_settles_every_pending_call_and_closes(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)

    await session.signal("cancel", {"reason": "wrong session"})

    summary = await session.result()
    assert summary.reason == "cancelled: wrong session"
    transcript = await session.query("transcript")
    assert_well_formed(transcript)
    result = next(m for m in transcript if m.get("tool_call_id") == item["call_id"])
    assert "cancelled (wrong session)" in result["content"]
    assert (agent.workspace / "notes.txt").exists()
    assert (await session.query("status"))["state"] == "closed"


async def test_cancel_does_not_wait_for_a_slow_model(gated_agent: tuple[Agent, GatedModel]) -> None:
    agent, model = gated_agent
    session = await agent.start("search for milk")
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 1)

    await session.signal("cancel", {})

    # The model never answers (its gate stays shut) and its call may take 5 min: a close well within
    # that (a minute times the patience, at most 4 min) is a close that did not wait for it.
    summary = await asyncio.wait_for(session.result(), timeout=min(60 * PATIENCE, 240))
    assert summary.reason == "cancelled: no reason given"
    model.gate.set()


async def test_cancelling_the_workflow_through_temporal_leaves_a_well_formed_transcript(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    await pending_items(session)

    await session.cancel()

    with pytest.raises(WorkflowFailureError) as failure:
        await session.result()
    assert isinstance(failure.value.cause, CancelledError)
    assert_well_formed(await session.query("transcript"))
    assert (agent.workspace / "notes.txt").exists()


async def test_two_approved_calls_of_one_step_run_concurrently(openai_agent) -> None:
    from tests.support.fake_openai import text, tool_calls

    agent, fake = openai_agent
    (agent.workspace / "a.txt").write_text("a")
    (agent.workspace / "b.txt").write_text("b")
    fake.script(
        tool_calls(("d1", "delete_file", {"path": "a.txt"}), ("d2", "delete_file", {"path": "b.txt"}),
                   ("s1", "search_web", {"query": "milk"})),
        text("both gone"),
    )
    session = await agent.start("delete a.txt and b.txt")
    items = await pending_items(session, count=2)
    assert {i["call_id"] for i in items} == {"d1", "d2"}
    await session.signal("approve", {"call_id": "d2"})
    await session.signal("approve", {"call_id": "d1"})

    status = await settled(session)
    assert status["last_answer"] == "both gone"
    assert not (agent.workspace / "a.txt").exists() and not (agent.workspace / "b.txt").exists()
    ids = [m["tool_call_id"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert ids == ["d1", "d2", "s1"], "results come back in the order the model asked"
