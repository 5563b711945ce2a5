"""A child cannot lift the root's rules: one story per way it might try (issue 30, Done when).

A child's own auto_approve and approvers are refused at start (test_sub_agents.py); here the rest:
a remembered approval, a child of a verified root, the person a child's calls are requested by,
and a session that only looks like a child (its id) posing as one to be listed and decided.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError

from tests.integration.test_people_workflow import proof_for, signing_key  # noqa: F401  (a fixture)
from tests.integration.test_sub_agents import JANITOR, delegating, root_pending  # noqa: F401  (a fixture)
from tests.support.sessions import Agent, eventually, in_time, pending_items, query, settled

REMEMBER = {"scope": "tool", "for_seconds": 3600}


async def test_an_approval_remembered_for_a_childs_call_covers_no_other_session_of_the_tree(delegating: Agent) -> None:
    """Given two janitors deleting at once, an approval with `remember` given at the root for the
    first's call is remembered in that child only: the sibling's delete still waits, and so does
    the root's own delete in its next turn."""
    for name in ("menu.txt", "soup.txt"):
        (delegating.workspace / name).write_text("x\n")
    root = await delegating.start("delegate janitor: delete notes.txt || janitor: delete menu.txt",
                                  agents={"janitor": JANITOR}, by="ana")
    pending = await root_pending(root, {("janitor",)})
    await eventually(lambda: query(root, "pending"), lambda items: len(items) == 2)
    first, second = sorted(await query(root, "pending"), key=lambda item: item["session_id"])
    await root.signal("approve", {"call_id": first["call_id"], "by": "ana", "remember": REMEMBER})
    [still] = await eventually(lambda: query(root, "pending"), lambda items: len(items) == 1)
    assert still["call_id"] == second["call_id"], pending
    remembered = (await query(delegating.client.get_workflow_handle(first["session_id"]), "status"))["remembered"]
    assert [grant["tool"] for grant in remembered] == ["delete_file"]
    await root.signal("approve", {"call_id": second["call_id"], "by": "ana"})
    await settled(root)
    assert (await query(root, "status"))["remembered"] == []

    await root.signal("user_message", {"text": "delete soup.txt", "by": "ana"})
    [own] = await pending_items(root)
    assert (own["tool"], own.get("path")) == ("delete_file", None) and (delegating.workspace / "soup.txt").exists()


async def test_a_remembered_approval_in_a_child_waives_nothing_the_root_requires(delegating: Agent) -> None:
    """Given a root whose delete needs two approvals, one person's `remember` for the child's
    delete is refused in the child (one person cannot remember what needs two), and the call runs
    only once a second person approves."""
    root = await delegating.start("delegate janitor: delete notes.txt", agents={"janitor": JANITOR}, by="ana",
                                  participants=["bob", "cy"], required_approvals={"delete_file": 2})
    [item] = await root_pending(root, {("janitor",)})
    assert item["required_approvals"] == 2
    janitor = delegating.client.get_workflow_handle(item["session_id"])
    await root.signal("approve", {"call_id": item["call_id"], "by": "bob", "remember": REMEMBER})
    refused = await eventually(lambda: query(janitor, "audit"), lambda audit: audit[-1]["event"] == "refused")
    assert "cannot remember" in refused[-1]["reason"] and (delegating.workspace / "notes.txt").exists()
    await root.signal("approve", {"call_id": item["call_id"], "by": "bob"})
    await eventually(lambda: query(janitor, "audit"), lambda audit: audit[-1]["event"] == "approved")
    assert (delegating.workspace / "notes.txt").exists(), "one approval of two ran the call"
    await root.signal("approve", {"call_id": item["call_id"], "by": "cy"})
    await settled(root)
    assert not (delegating.workspace / "notes.txt").exists()
    assert (await query(janitor, "status"))["remembered"] == []


async def test_a_child_of_a_verified_root_takes_no_unverified_decision(delegating: Agent, signing_key: Any) -> None:
    """Given a root whose decisions count only with the API's proof, its child is verified too: an
    approval without a proof, sent to the root or straight to the child, is refused and audited
    there, and the call still waits."""
    root = await delegating.start("delegate janitor: delete notes.txt", agents={"janitor": JANITOR},
                                  by="ana", verified_decisions=True)
    [item] = await root_pending(root, {("janitor",)})
    janitor = delegating.client.get_workflow_handle(item["session_id"])
    assert (await query(janitor, "status"))["verified"] is True
    await root.signal("approve", {"call_id": item["call_id"], "by": "ana"})
    await janitor.signal("approve", {"call_id": item["child_call_id"], "by": "ana"})
    audit = await eventually(lambda: query(janitor, "audit"),
                             lambda audit: [event["event"] for event in audit].count("refused") == 2)
    assert all("proof" in event["reason"] for event in audit if event["event"] == "refused"), audit
    assert (delegating.workspace / "notes.txt").exists()
    assert [entry["call_id"] for entry in await query(root, "pending")] == [item["call_id"]]


async def test_a_child_of_a_four_eyes_root_is_asked_for_by_whoever_asked_the_root(delegating: Agent) -> None:
    """Given a four-eyes root owned by ana, when bob asks it to delegate, the child's delete is
    bob's request: bob cannot approve it (the child does not take its owner for its requester)."""
    root = await delegating.start("hello", agents={"janitor": JANITOR}, by="ana", participants=["bob"],
                                  four_eyes=True)
    await settled(root)
    await root.signal("user_message", {"text": "delegate janitor: delete notes.txt", "by": "bob"})
    [item] = await root_pending(root, {("janitor",)})
    janitor = delegating.client.get_workflow_handle(item["session_id"])
    await root.signal("approve", {"call_id": item["call_id"], "by": "bob"})
    refused = await eventually(lambda: query(janitor, "audit"), lambda audit: audit[-1]["event"] == "refused")
    assert "four-eyes" in refused[-1]["reason"] and (delegating.workspace / "notes.txt").exists()
    await root.signal("approve", {"call_id": item["call_id"], "by": "ana"})
    await settled(root)
    assert not (delegating.workspace / "notes.txt").exists()


async def test_a_session_with_a_childs_id_is_not_the_roots_child(delegating: Agent) -> None:
    """A session started straight through Temporal with the id the root's first delegation would
    take (`<root>/janitor/1`), or naming the root as its parent, is not listed in the root's
    pending (not even when it reports itself to the root as a child would) and gets no decision
    sent to the root; the root's delegation, its id taken, is a tool
    error its model reads, not a stuck session."""
    root = await delegating.start("hello", agents={"janitor": JANITOR}, by="ana")
    await settled(root)
    poser = await delegating.start("delete notes.txt", session_id=f"{root.id}/janitor/1", by="mallory")
    [posed] = await pending_items(poser)
    forged = await delegating.start("delete notes.txt", session_id=f"{root.id}/janitor/2", by="mallory",
                                    delegated={"parent": root.id, "root": root.id, "path": ["janitor"]})
    with pytest.raises(WorkflowFailureError) as failure:
        await in_time(forged.result())  # refused as it starts, not waiting for a person
    assert "only the parent session named there may start a child session" in str(failure.value.cause)

    as_a_child = {**posed, "call_id": f"{poser.id}/{posed['call_id']}", "child_call_id": posed["call_id"],
                  "session_id": poser.id, "path": ["janitor"]}
    await root.signal("child_pauses", {"session_id": poser.id, "seq": 1, "items": [as_a_child]})
    await root.signal("approve", {"call_id": as_a_child["call_id"], "by": "ana"})
    await root.signal("user_message", {"text": "delegate janitor: delete notes.txt", "by": "ana"})
    status = await settled(root)
    assert "the agent could not start" in status["last_answer"], status
    assert await query(root, "pending") == [] and [item["call_id"] for item in await query(poser, "pending")] == [
        posed["call_id"]]
    refused = [event for event in await query(root, "audit") if event["event"] == "refused"]
    assert [event["call_id"] for event in refused] == [f"{poser.id}/{posed['call_id']}"]
    assert (delegating.workspace / "notes.txt").exists()


async def test_a_forged_childs_report_adds_no_row_larger_than_the_sessions_own(delegating: Agent) -> None:
    """Anyone with Temporal access can signal the root under its child's id: the decisions such a
    report says were made below are recorded, but each text clipped as the root's own rows are, and
    its path no deeper than delegation goes."""
    root = await delegating.start("hello", agents={"janitor": JANITOR}, by="ana")
    await settled(root)
    await root.signal("user_message", {"text": "delegate janitor: delete notes.txt", "by": "ana"})
    [item] = await root_pending(root, {("janitor",)})
    huge = "x" * 100_000
    forged = {"at": "2026-01-01T00:00:00Z", "event": "approved", "call_id": f"{item['session_id']}/forged",
              "tool": "delete_file", "by": huge, "reason": huge, "comment": huge, "rule": huge,
              "session_id": item["session_id"], "path": ["janitor" + huge[:1_000]] * 100}
    await root.signal("child_pauses", {"session_id": item["session_id"], "seq": 1_000, "items": [item], "decided": [forged]})
    audit = await eventually(lambda: query(root, "audit"), lambda rows: any(r["call_id"] == forged["call_id"] for r in rows))
    [row] = [row for row in audit if row["call_id"] == forged["call_id"]]
    assert all(len(row[key]) < 1_100 for key in ("by", "reason", "comment", "rule")), {k: len(row[k]) for k in ("by", "reason")}
    assert len(row["path"]) <= 4 and all(len(name) < 1_100 for name in row["path"])
    assert [i["call_id"] for i in await query(root, "pending")] == [item["call_id"]]  # the child's call still waits
