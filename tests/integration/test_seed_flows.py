"""The flows a first user tries: delete with approval, rejection, a flight with a question."""

from __future__ import annotations

from activities.tools.bookings import all_bookings
from tests.support.sessions import Agent, assert_well_formed, pending_items, pending_of_kind, settled
from workflows.conversation import without_answer_frame


async def test_delete_approved_runs_the_tool(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")

    [item] = await pending_items(session)
    assert item["kind"] == "approval"
    assert item["tool"] == "delete_file"
    assert item["args"] == {"path": "notes.txt"}
    assert (agent.workspace / "notes.txt").exists()

    await session.signal("approve", {"by": "ana"})

    status = await settled(session)
    assert not (agent.workspace / "notes.txt").exists()
    assert status["last_answer"] == "Deleted notes.txt."


async def test_delete_rejected_with_reason_keeps_the_file(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    await pending_items(session)

    await session.signal("reject", {"reason": "keep it", "by": "ana"})

    status = await settled(session)
    assert (agent.workspace / "notes.txt").exists()
    assert status["last_answer"].startswith("I did not delete notes.txt, as you asked.")
    tool_result = [m for m in await session.query("transcript") if m["role"] == "tool"][-1]
    assert "Rejected by ana" in tool_result["content"] and "keep it" in tool_result["content"]


async def test_flight_asks_then_needs_approval_then_books_once(agent: Agent) -> None:
    session = await agent.start("book me a flight to Beijing on 2026-12-24")

    [question] = await pending_items(session)
    assert question["kind"] == "question"
    assert question["question"] == "Which city are you departing from?"

    await session.signal("answer", {"answer": "Shanghai"})

    approval = await pending_of_kind(session, "approval")
    assert approval["tool"] == "book_flight"
    assert approval["args"] == {"origin": "Shanghai", "destination": "Beijing", "date": "2026-12-24"}
    await session.signal("approve", {"call_id": approval["call_id"]})

    status = await settled(session)
    [booking] = all_bookings(agent.workspace)
    assert (booking.origin, booking.destination, booking.date) == ("Shanghai", "Beijing", "2026-12-24")
    assert booking.reference in status["last_answer"]
    answer_result = next(m for m in await session.query("transcript") if m.get("tool_call_id") == question["call_id"])
    assert answer_result["content"].startswith("[answer from a person")  # framed by the product, then verbatim
    assert without_answer_frame(answer_result["content"]) == "Shanghai"
    assert_well_formed(await session.query("transcript"))
