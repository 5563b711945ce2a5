"""What a session remembers and what it queues must survive its own bookkeeping.

Two stories that a quieter test let slip: a "same_args" memory that never
matched anything, and a message dropped when the session continued as new.
"""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import EventType

from tests.support.sessions import Agent, GatedModel, eventually, pending_items, query, settled


async def test_a_same_args_memory_approves_the_same_call_again_but_not_other_args(agent: Agent) -> None:
    for name in ("a.txt", "b.txt"):
        (agent.workspace / name).write_text(name)
    session = await agent.start("please delete a.txt")
    [first] = await pending_items(session)
    await session.execute_update(
        "approve_update", {"by": "ana", "remember": {"scope": "same_args", "for_seconds": 3600}}
    )
    await settled(session)
    assert not (agent.workspace / "a.txt").exists()

    # The same call again: the memory covers it, nobody is asked.
    (agent.workspace / "a.txt").write_text("back again")
    await session.execute_update("user_message_update", {"text": "please delete a.txt"})
    status = await eventually(lambda: query(session, "status"), lambda s: s["turn"] == 2 and s["state"] == "idle")
    assert status["last_answer"] == "Deleted a.txt." and not (agent.workspace / "a.txt").exists()
    [auto] = [e for e in await query(session, "audit") if e["event"] == "auto_approved"]
    assert auto["by"] == "ana" and first["call_id"] in auto["rule"] and "same_args" in auto["rule"]

    # Other arguments: the memory does not reach them, a person is asked.
    await session.execute_update("user_message_update", {"text": "please delete b.txt"})
    [other] = await pending_items(session)
    assert other["args"] == {"path": "b.txt"} and other["kind"] == "approval"
    assert (agent.workspace / "b.txt").exists()


async def test_a_message_queued_at_the_hand_over_to_a_new_run_is_answered(
    gated_agent: tuple[Agent, GatedModel],
) -> None:
    agent, model = gated_agent
    model.free_calls = 1  # the search goes through; the model's summing up waits at the gate
    # A run hands over once a turn ends past this many events: the first turn ends at about 32
    # (a build's start checks move it by a few), so well under that, and never before the turn ends.
    session = await agent.start("search for milk", continue_as_new_after_events=26)
    first_run = (await session.describe()).run_id
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 2)

    # Sent while the turn's last model call is in flight: it waits for the next turn.
    await session.execute_update("user_message_update", {"text": "please delete notes.txt"})
    assert (await query(session, "status"))["queued_messages"] == 1
    model.gate.set()

    latest = agent.client.get_workflow_handle(session.id)
    await eventually(lambda: latest.describe(), lambda d: d.run_id != first_run)
    first_history = await agent.client.get_workflow_handle(session.id, run_id=first_run).fetch_history()
    model_calls = [
        e for e in first_history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
    ]
    assert first_history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert len(model_calls) == 2, "the queued message must cross the hand-over, not be answered before it"

    [item] = await pending_items(latest)
    assert item["tool"] == "delete_file" and item["args"] == {"path": "notes.txt"}
    transcript = await query(latest, "transcript")
    assert [m["content"] for m in transcript if m["role"] == "user"] == ["search for milk", "please delete notes.txt"]
    status = await query(latest, "status")
    assert status["turn"] == 2 and status["queued_messages"] == 0
