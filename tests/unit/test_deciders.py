"""Who may decide an open call: one rule (workflows/deciders.py), and its three callers agree."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone
from typing import Any

import pytest

from hitl.access import SessionFacts, verdict, waits_for_person
from hitl.catalog import CATALOG
from hitl.client.inbox import InboxItem
from workflows.deciders import DEFAULT_DECIDERS, CallRules, refusal_to_decide, waits_for
from workflows.decisions import Approve, Refusal
from workflows.pauses import Pauses, PendingCall
from workflows.rules import args_sha256

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def call(**rules: Any) -> PendingCall:
    return PendingCall(call_id="c1", kind=rules.pop("kind", "approval"), tool="delete_file", args={"path": "a"},
                       args_sha256=args_sha256({"path": "a"}), requested_at=NOW, **rules)


@pytest.mark.parametrize("rules, person, verb, reason", [
    ({}, "eve", "approve", None),
    ({}, None, "approve", None),
    ({"approvers": ["ana"]}, "ana", "approve", None),
    ({"approvers": ["ana"]}, "eve", "reject", "eve may not decide delete_file; approvers: ana"),
    ({"approvers": ["ana", "bo"]}, None, "approve", "only ana, bo may decide delete_file; say who you are (by)"),
    ({"four_eyes": True, "requested_by": "ana"}, "ana", "approve", "four-eyes rule: ana asked for this call and cannot approve it"),
    ({"four_eyes": True, "requested_by": "ana"}, "ana", "reject", None),
    ({"four_eyes": True, "requested_by": "ana"}, None, "approve", "four-eyes rule: say who you are (by)"),
    ({"four_eyes": True, "requested_by": "ana"}, "ana", "claim", None),
    # A question names approvers only when an MCP server asks it during a call that waited for them:
    # it is that call's decision, under its four-eyes rule (the requester may still decline it).
    ({"kind": "question", "approvers": ["ana"]}, "eve", "answer", "eve may not decide delete_file; approvers: ana"),
    ({"kind": "question", "approvers": None}, "eve", "answer", None),
    ({"kind": "question", "four_eyes": True, "requested_by": "ana"}, "ana", "answer",
     "four-eyes rule: ana asked for this call and cannot approve it"),
    ({"kind": "question", "four_eyes": True, "requested_by": "ana"}, "ana", "reject", None),
])
def test_the_rule(rules: dict[str, Any], person: str | None, verb: str, reason: str | None) -> None:
    assert refusal_to_decide(call(**rules), person, verb) == reason


def test_groups_expand_and_a_caller_may_say_who_decides_when_nobody_is_named() -> None:
    named = call(approvers=["@oncall"])
    assert refusal_to_decide(named, "ana", "approve") == "ana may not decide delete_file; approvers: @oncall"
    assert refusal_to_decide(named, "ana", "approve", expand=lambda names: {"ana"}) is None
    unnamed = call()
    assert refusal_to_decide(unnamed, "eve", "approve", by_default=lambda person: person == "ana") == \
        f"eve may not decide delete_file; approvers: {DEFAULT_DECIDERS}"
    assert refusal_to_decide(unnamed, "ana", "approve", by_default=lambda person: person == "ana") is None


def test_an_inbox_leaves_out_what_the_person_already_voted_for() -> None:
    assert waits_for(call(required_approvals=2), "ana")
    assert not waits_for(call(required_approvals=2, approvals=["ana"]), "ana")


def test_a_malformed_item_grants_nobody_anything() -> None:
    assert refusal_to_decide(CallRules.of({"tool": "x", "approvers": "ana"}), "ana", "approve") is not None


GRID = list(itertools.product(
    [None, ["ana"], ["bo"], ["ana", "bo"]],  # approvers
    [False, True],  # four eyes
    [None, "ana", "bo"],  # who asked
    [[], ["ana"], ["bo"]],  # approvals already given
))


@pytest.mark.parametrize("approvers, four_eyes, requested_by, approvals", GRID)
def test_the_workflow_the_api_and_both_inboxes_agree(approvers: list[str] | None, four_eyes: bool,
                                                     requested_by: str | None, approvals: list[str]) -> None:
    """For ana, owner of the session: the session accepts her approval exactly when the API lets
    it through and both inboxes list the call (three approvals needed, so hers is a vote)."""
    item = call(approvers=approvers, four_eyes=four_eyes, requested_by=requested_by, approvals=approvals,
                required_approvals=3)
    try:
        Pauses(open=[item]).decide(Approve(call_id="c1", by="ana"), CATALOG, NOW)
        accepted = True
    except Refusal as refusal:
        assert refusal.code == "forbidden", str(refusal)
        accepted = False
    view = item.view()
    session = SessionFacts("s1", "r1", False, owner="ana", pending=(view,))
    api_allows = verdict("ana", "decide", session, None, view, "approve").allowed and "ana" not in approvals
    row = InboxItem.model_validate({**view, "session_id": "s1"})
    assert accepted == api_allows == row.may_be_decided_by("ana") == waits_for_person("ana", view, session, None)
