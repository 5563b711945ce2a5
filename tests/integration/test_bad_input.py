"""Bad input gets a clear answer and loses nothing; no workflow task ever fails."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle

from tests.support.sessions import Agent, eventually, pending_items, query, refused_update, settled
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.session_health import assert_healthy, assert_no_failed_workflow_task



async def last_ignored(session: WorkflowHandle[Any, Any], count: int) -> list[dict[str, Any]]:
    status = await eventually(lambda: query(session, "status"), lambda s: len(s["ignored_signals"]) >= count)
    return status["ignored_signals"]


async def test_decisions_that_match_nothing_are_refused_and_change_nothing(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)

    assert await refused_update(session, "approve_update", {"call_id": "nope"}) == "unknown call_id 'nope'"
    assert "is an approval of delete_file; use approve or reject" in await refused_update(
        session, "answer_update", {"answer": "yes"}
    )
    assert "malformed approve" in await refused_update(session, "approve_update", "yes please")
    assert "reson" in await refused_update(session, "reject_update", {"reson": "typo"})
    assert "args" in await refused_update(session, "approve_update", {"args": "not an object"})
    assert "malformed user_message" in await refused_update(session, "user_message_update", {})

    await session.signal("approve", {"call_id": "nope"})
    await session.signal("answer", {"answer": "yes"})
    await session.signal("approve", "yes please")
    await session.signal("user_message", {"txt": "typo"})
    ignored = await last_ignored(session, 4)
    assert [i["signal"] for i in ignored] == ["approve", "answer", "approve", "user_message"]
    assert ignored[0]["reason"] == "unknown call_id 'nope'"
    assert await query(session, "pending") == [item], "nothing changed"
    assert (await query(session, "status"))["state"] == "awaiting_human"

    await session.signal("approve", {"call_id": item["call_id"]})
    await settled(session)
    assert "already settled (approved)" in await refused_update(session, "approve_update", {"call_id": item["call_id"]})
    assert "nothing is pending" in await refused_update(session, "reject_update", {})
    refused = [e for e in await query(session, "audit") if e["event"] == "refused"]
    assert len(refused) == 4 and refused[0]["call_id"] == "nope"
    await assert_healthy(session)


async def test_edited_args_are_validated_and_the_model_is_told(agent: Agent) -> None:
    (agent.workspace / "other.txt").write_text("x")
    session = await agent.start("please delete notes.txt")
    await pending_items(session)

    reason = await refused_update(session, "approve_update", {"args": {"file": "other.txt"}})
    assert reason.startswith("edited args do not fit delete_file")
    assert len(await query(session, "pending")) == 1

    receipt = await session.execute_update("approve_update", {"args": {"path": "other.txt"}, "by": "ana"})
    assert receipt["outcome"] == "edited"

    await settled(session)
    assert (agent.workspace / "notes.txt").exists()
    assert not (agent.workspace / "other.txt").exists()
    result = [m for m in await query(session, "transcript") if m["role"] == "tool"][-1]["content"]
    assert "A person (ana) edited the arguments" in result and '"other.txt"' in result
    assert result.endswith("Deleted other.txt.")
    await assert_healthy(session)


async def test_two_pending_calls_need_a_call_id(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(
        tool_calls(("a", "send_email", {"to": "x@example.com", "subject": "s", "body": "b"}),
                   ("b", "send_email", {"to": "y@example.com", "subject": "s", "body": "b"})),
        text("sent"),
    )
    session = await agent.start("send two emails")
    await pending_items(session, count=2)

    reason = await refused_update(session, "approve_update", {})
    assert reason == "2 calls are pending (a, b); say which call_id to approve"
    await session.execute_update("approve_update", {"call_id": "a"})
    await session.execute_update("reject_update", {"call_id": "b", "reason": "not y"})
    await settled(session)
    assert [p.name for p in (agent.workspace / "outbox").iterdir()] == [f"{session.id}--a.eml"]
    await assert_healthy(session)


async def test_answers_outside_the_choices_are_refused(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(
        tool_calls(("q1", "ask_user_question", {"question": "Which class?", "choices": ["economy", "business"]})),
        text("ok"),
    )
    session = await agent.start("book something")
    [item] = await pending_items(session)
    assert item["choices"] == ["economy", "business"]

    assert "'first' is not one of the choices" in await refused_update(session, "answer_update", {"answer": "first"})
    assert "is a question" in await refused_update(session, "approve_update", {})
    await session.execute_update("answer_update", {"answer": "Business"})

    await settled(session)
    # The choice as listed, framed by the product as a person's answer (workflows/conversation.py).
    assert fake.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "q1", "content": "[answer from a person]\nbusiness"}


async def test_a_form_answer_is_checked_field_by_field(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fields = [{"name": "origin", "type": "string"}, {"name": "date", "type": "date"},
              {"name": "seats", "type": "integer", "required": False}]
    fake.script(tool_calls(("q1", "ask_user_question", {"question": "Trip details?", "fields": fields})), text("ok"))
    session = await agent.start("book something")
    await pending_items(session)

    assert "date is required" in await refused_update(session, "answer_update", {"answer": {"origin": "Paris"}})
    assert "date" in await refused_update(session, "answer_update", {"answer": {"origin": "Paris", "date": "soon"}})
    assert "answer with an object" in await refused_update(session, "answer_update", {"answer": "Paris"})
    await session.execute_update("answer_update", {"answer": {"origin": "Paris", "date": "2026-12-24", "seats": "2"}})

    await settled(session)
    assert fake.requests[1]["messages"][-1]["content"] == '[answer from a person]\n{"origin": "Paris", "date": "2026-12-24", "seats": 2}'


async def test_paths_that_leave_the_workspace_are_refused_to_the_model(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    outside = agent.workspace.parent / "outside.txt"
    outside.write_text("precious")
    (agent.workspace / "link.txt").symlink_to(outside)
    fake.script(
        tool_calls(("a", "delete_file", {"path": "../outside.txt"}), ("b", "delete_file", {"path": str(outside)}),
                   ("c", "delete_file", {"path": "link.txt"}), ("d", "delete_file", {"path": "missing.txt"})),
        text("could not"),
    )
    session = await agent.start("delete things")
    for item in await pending_items(session, count=4):
        await session.signal("approve", {"call_id": item["call_id"]})

    await settled(session)
    assert outside.read_text() == "precious"
    results = {m["tool_call_id"]: m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"}
    assert "leaves the workspace" in results["a"]
    assert "is absolute" in results["b"]
    assert results["c"].endswith("Deleted the link link.txt (what it pointed to is untouched).")
    assert not (agent.workspace / "link.txt").is_symlink(), "deleting a link removes the link itself"
    assert "there is no file 'missing.txt'" in results["d"]
    assert all(results[c].startswith("Error: delete_file failed") for c in "abd")
    await assert_healthy(session)


async def test_invalid_session_input_fails_the_start_clearly(agent: Agent) -> None:
    session = await agent.client.start_workflow(
        "AgentWorkflow", {"mesage": "typo"}, id="bad-input", task_queue=agent.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await session.result()
    message = failure.value.cause.message
    assert message.startswith("invalid session input") and "message" in message and "mesage" in message
    await assert_no_failed_workflow_task(session)
