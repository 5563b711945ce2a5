"""An adversarial review of the authorization model (issue 14): what a changed operator policy,
an escalation, or a start through the Temporal frontend could still do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent, eventually, pending_items, query, refused_update, settled
from tests.test_authorization import write_policy


async def test_an_escalation_adds_only_people_the_policy_lets_decide(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operator took eve off the deletion approvers; a session that escalates to eve still made
    her an approver of the next deletion when its escalation came due, and her approval ran it."""
    policy = {"tools": {"delete_file": {"approval": "always", "approvers": ["ana", "eve"]}}}
    path = write_policy(tmp_path, monkeypatch, policy)
    (agent.workspace / "plans.txt").write_text("secret plans\n")
    session = await agent.start("please delete notes.txt", escalate_to=["eve"], escalate_after_seconds=1)
    [first] = await pending_items(session)
    await session.execute_update("approve_update", {"call_id": first["call_id"], "by": "ana"})
    await settled(session)

    policy["tools"]["delete_file"]["approvers"] = ["ana"]
    path.write_text(__import__("json").dumps(policy))
    await session.signal("user_message", {"text": "please delete plans.txt"})
    [item] = await eventually(lambda: query(session, "pending"),
                              lambda items: len(items) == 1 and "escalate_at" not in items[0])
    assert item["approvers"] == ["ana"], item
    assert "may not decide" in await refused_update(session, "approve_update", {"call_id": item["call_id"], "by": "eve"})
    assert (agent.workspace / "plans.txt").exists()


@pytest.mark.parametrize("tightened", [
    {"approvers": ["bob"]},
    {"approvers": ["ana", "bob"], "required_approvals": 2},
    {"approvers": ["ana", "bob"], "four_eyes": True},
])
async def test_a_remembered_approval_stops_covering_what_the_policy_no_longer_lets_it_decide(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tightened: dict[str, Any],
) -> None:
    """ana remembered an approval of deletions; the operator then took her off the approvers (or
    made deletions need two people, or four eyes): ana's remembered word still ran the next one."""
    policy = {"tools": {"delete_file": {"approval": "always", "approvers": ["ana", "bob"]}}}
    path = write_policy(tmp_path, monkeypatch, policy)
    (agent.workspace / "plans.txt").write_text("secret plans\n")
    session = await agent.start("please delete notes.txt", by="ana")
    [first] = await pending_items(session)
    await session.execute_update("approve_update", {"call_id": first["call_id"], "by": "ana",
                                                    "remember": {"scope": "tool", "for_seconds": 3600}})
    await settled(session)

    policy["tools"]["delete_file"] = {"approval": "always", **tightened}
    path.write_text(__import__("json").dumps(policy))
    await session.signal("user_message", {"text": "please delete plans.txt", "by": "ana"})
    [item] = await pending_items(session)
    assert item["tool"] == "delete_file" and (agent.workspace / "plans.txt").exists()
    assert [e["event"] for e in await query(session, "audit")].count("auto_approved") == 0
