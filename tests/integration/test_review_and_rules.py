"""Beyond approve/reject: review of results, who may decide, remembered decisions, policies."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowHandle

from tests.support.sessions import Agent, assert_well_formed, eventually, pending_items, query, refused_update, settled
from tests.support.fake_openai import FakeOpenAI, text, tool_calls

DRAFT = "draft an email to ana@example.com about lunch saying see you at noon"



async def tool_result(session: WorkflowHandle[Any, Any], call_id: str) -> str:
    return next(m["content"] for m in await query(session, "transcript") if m.get("tool_call_id") == call_id)


# ---------------------------------------------------------------- review


async def test_a_reviewed_result_reaches_the_model_only_after_approval(agent: Agent) -> None:
    session = await agent.start(DRAFT)

    [item] = await pending_items(session)
    assert item["kind"] == "review" and item["tool"] == "draft_email"
    assert "Subject: lunch" in item["result"]
    [draft] = list((agent.workspace / "drafts").iterdir())  # the tool already ran
    assert "see you at noon" in draft.read_text()
    assert [m["role"] for m in await query(session, "transcript")] == ["user", "assistant"]

    assert "replace its result, not its args" in await refused_update(session, "approve_update", {"args": {"to": "x"}})
    await session.execute_update("approve_update", {"by": "ana"})

    status = await settled(session)
    assert await tool_result(session, item["call_id"]) == item["result"]
    assert "as reviewed" in status["last_answer"]


async def test_a_reviewer_can_replace_the_result(agent: Agent) -> None:
    session = await agent.start(DRAFT)
    [item] = await pending_items(session)

    await session.execute_update("approve_update", {"result": "Lunch moved to 1pm.", "by": "ana", "comment": "fixed the time"})

    await settled(session)
    result = await tool_result(session, item["call_id"])
    assert result.startswith("A person (ana) edited this result before you saw it.")
    assert "Lunch moved to 1pm." in result and "fixed the time" in result
    # the tool ran unasked (audited with the rule that let it), then a person reviewed its result
    assert [e["event"] for e in await query(session, "audit")] == ["auto_approved", "requested", "edited"]


async def test_a_rejected_result_tells_the_model_why(agent: Agent) -> None:
    session = await agent.start(DRAFT)
    [item] = await pending_items(session)
    await session.signal("reject", {"reason": "too casual"})
    await settled(session)
    assert await tool_result(session, item["call_id"]) == "A person rejected this result: too casual"
    assert_well_formed(await query(session, "transcript"))


# ------------------------------------------------------------ who may decide


async def test_only_listed_approvers_may_decide(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", approvers={"delete_file": ["oncall-1", "oncall-2"]})
    [item] = await pending_items(session)
    assert item["approvers"] == ["oncall-1", "oncall-2"]

    assert await refused_update(session, "approve_update", {"by": "mallory"}) == (
        "mallory may not decide delete_file; approvers: oncall-1, oncall-2")
    assert "say who you are" in await refused_update(session, "approve_update", {})
    assert "mallory may not decide" in await refused_update(session, "reject_update", {"by": "mallory", "reason": "x"})
    await session.signal("approve", {"by": "mallory"})
    await session.execute_update("approve_update", {"by": "oncall-2"})

    await settled(session)
    assert not (agent.workspace / "notes.txt").exists()
    refusals = [e for e in await query(session, "audit") if e["event"] == "refused"]
    assert refusals[0]["by"] == "mallory" and "may not decide" in refusals[0]["reason"]


async def test_a_wildcard_approver_list_covers_every_tool(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", approvers={"*": ["lead"]})
    await pending_items(session)
    assert "lead" in await refused_update(session, "approve_update", {"by": "dev"})


async def test_two_distinct_approvals_are_needed_and_one_rejection_rejects(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", required_approvals={"delete_file": 2})
    [item] = await pending_items(session)

    receipt = await session.execute_update("approve_update", {"by": "ana"})
    assert receipt["outcome"] == "awaiting_more_approvals" and receipt["approvals"] == ["ana"]
    assert "ana already approved" in await refused_update(session, "approve_update", {"by": "ana"})
    assert "2 distinct approvers" in await refused_update(session, "approve_update", {})
    [still] = await query(session, "pending")
    assert still["approvals"] == ["ana"] and (agent.workspace / "notes.txt").exists()
    await session.execute_update("approve_update", {"by": "bo"})

    await settled(session)
    assert not (agent.workspace / "notes.txt").exists()
    approvals = [e for e in await query(session, "audit") if e["event"] == "approved"]
    # Sent straight to Temporal (this SDK client names no door): the vote's row and the settling one say so.
    assert [(e["by"], e["rule"], e["via"]) for e in approvals] == [
        ("ana", "1 of 2 approvals", "temporal"), ("bo", "2 of 2 approvals", "temporal")]

    (agent.workspace / "notes.txt").write_text("again")
    await session.signal("user_message", {"text": "please delete notes.txt"})
    [second] = await eventually(lambda: query(session, "pending"), lambda items: len(items) == 1 and items[0]["call_id"] != item["call_id"])
    await session.execute_update("approve_update", {"by": "ana"})
    await session.execute_update("reject_update", {"by": "bo", "reason": "not twice"})
    await eventually(lambda: query(session, "status"), lambda s: s["state"] == "idle" and "not twice" in s["last_answer"])
    assert (agent.workspace / "notes.txt").exists()


async def test_four_eyes_keeps_the_requester_from_approving(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", by="alice", four_eyes=True)
    [item] = await pending_items(session)
    assert item["requested_by"] == "alice"

    assert await refused_update(session, "approve_update", {"by": "alice"}) == (
        "four-eyes rule: alice asked for this call and cannot approve it")
    await session.execute_update("reject_update", {"by": "alice", "reason": "changed my mind"})  # rejecting is fine
    await settled(session)

    await session.execute_update("user_message_update", {"text": "please delete notes.txt", "by": "carol"})
    [again] = await eventually(lambda: query(session, "pending"), lambda items: len(items) == 1)
    assert again["requested_by"] == "carol"
    await session.execute_update("approve_update", {"by": "alice"})
    await settled(session)
    assert not (agent.workspace / "notes.txt").exists()


async def test_a_decision_on_stale_arguments_is_refused(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(tool_calls(("c1", "delete_file", {"path": "notes.txt"})), text("done"))
    session = await agent.start("delete notes", required_approvals={"delete_file": 2})
    [item] = await pending_items(session)
    seen = item["args_sha256"]

    (agent.workspace / "other.txt").write_text("x")
    await session.execute_update("approve_update", {"by": "ana", "args": {"path": "other.txt"}})
    [edited] = await query(session, "pending")
    assert edited["args"] == {"path": "other.txt"} and edited["args_sha256"] != seen

    reason = await refused_update(session, "approve_update", {"by": "bo", "expected_args_sha256": seen})
    assert reason.startswith("stale decision: c1's arguments are now")
    await session.execute_update("approve_update", {"by": "bo", "expected_args_sha256": edited["args_sha256"]})

    await settled(session)
    assert not (agent.workspace / "other.txt").exists() and (agent.workspace / "notes.txt").exists()


# --------------------------------------------------- remembered decisions, policies


async def test_a_remembered_approval_covers_later_calls_of_the_tool(agent: Agent) -> None:
    for name in ("a.txt", "b.txt"):
        (agent.workspace / name).write_text(name)
    session = await agent.start("please delete a.txt")
    [first] = await pending_items(session)
    await session.execute_update("approve_update", {"by": "ana", "remember": {"scope": "tool", "for_seconds": 3600}})
    await settled(session)

    await session.execute_update("user_message_update", {"text": "please delete b.txt"})
    await eventually(lambda: query(session, "status"), lambda s: s["state"] == "idle" and "b.txt" in s["last_answer"])

    assert not (agent.workspace / "b.txt").exists()
    auto = [e for e in await query(session, "audit") if e["event"] == "auto_approved"]
    assert len(auto) == 1 and auto[0]["by"] == "ana" and first["call_id"] in auto[0]["rule"]
    assert (await query(session, "status"))["remembered"][0]["scope"] == "tool"


async def test_a_same_args_memory_does_not_cover_other_args_and_expires(agent: Agent) -> None:
    for name in ("a.txt", "b.txt"):
        (agent.workspace / name).write_text(name)
    session = await agent.start("please delete a.txt")
    await pending_items(session)
    await session.execute_update("approve_update", {"remember": {"scope": "same_args", "for_seconds": 1}})
    await settled(session)

    await session.execute_update("user_message_update", {"text": "please delete b.txt"})
    [other] = await eventually(lambda: query(session, "pending"), lambda items: len(items) == 1)
    assert other["args"] == {"path": "b.txt"}, "different args are not covered"
    await session.execute_update("reject_update", {"reason": "no"})
    await asyncio.sleep(1.2)
    (agent.workspace / "a.txt").write_text("back")
    await session.execute_update("user_message_update", {"text": "please delete a.txt"})
    await eventually(lambda: query(session, "pending"), lambda items: len(items) == 1 and items[0]["args"] == {"path": "a.txt"})


async def test_session_policies_override_the_tools_own_flags(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", auto_approve=["delete_file"], require_approval=["search_web"])
    await settled(session)
    assert not (agent.workspace / "notes.txt").exists()
    [auto] = [e for e in await query(session, "audit") if e["event"] == "auto_approved"]
    assert auto["rule"] == "session auto_approve"

    await session.signal("user_message", {"text": "search for milk"})
    [item] = await pending_items(session)
    assert item["tool"] == "search_web" and item["kind"] == "approval"


async def test_the_audit_lists_every_request_and_decision_in_order(agent: Agent) -> None:
    session = await agent.start("book me a flight to Beijing on 2026-12-24", by="ana")
    await pending_items(session)
    await session.signal("answer", {"answer": "Shanghai", "by": "ana"})
    [approval] = await eventually(lambda: query(session, "pending"), lambda items: bool(items) and items[0]["kind"] == "approval")
    await session.signal("approve", {"call_id": "call_9", "by": "bo"})
    await session.signal("approve", {"call_id": approval["call_id"], "by": "bo", "comment": "ok"})
    await settled(session)

    audit = await query(session, "audit")
    assert [e["event"] for e in audit] == ["requested", "answered", "requested", "refused", "approved"]
    keys = {"at", "event", "call_id", "tool", "args_sha256", "by", "reason", "comment", "rule"}
    assert all(keys <= set(e) for e in audit)
    approved = audit[-1]
    assert (approved["by"], approved["comment"], approved["tool"]) == ("bo", "ok", "book_flight")
    assert approved["args_sha256"] == approval["args_sha256"]
    assert audit[2]["by"] == "ana" and audit[2]["rule"] == "approval"
    assert audit[3]["reason"] == "unknown call_id 'call_9'"
