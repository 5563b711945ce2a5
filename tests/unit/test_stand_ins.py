"""The rules of stand-ins (workflows/stand_ins.py): who may decide for whom, four eyes for both,
one vote a person, and the bounds of a hand-over; and how a session's pauses apply them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from hitl.catalog import CATALOG
from workflows.decisions import Approve, Refusal, Reject
from workflows.deciders import CallRules
from workflows.pauses import Pauses, PendingCall
from workflows.policy import parse_policy
from workflows.stand_ins import (
    StandIn, delegators_of, refusal_to_hand_over, refusal_to_stand_in, second_vote_refusal,
)

NOW = datetime(2026, 12, 7, 12, tzinfo=timezone.utc)


def hand_over(from_: str = "ana", to: str = "bob", tools: list[str] | None = None, **fields: object) -> StandIn:
    return StandIn.model_validate({"id": "so-1", "from": from_, "to": to, "tools": tools,
                                   "since": NOW - timedelta(hours=1), "until": NOW + timedelta(days=1), **fields})


def call(**rules: object) -> CallRules:
    return CallRules.model_validate({"tool": "delete_file", "approvers": ["ana"], **rules})


def test_a_stand_in_decides_what_their_delegator_may_decide() -> None:
    assert refusal_to_stand_in(call(), "bob", "ana", "approve") is None
    refusal = refusal_to_stand_in(call(), "bob", "dave", "approve")
    assert refusal == "bob decides for dave, and dave may not decide delete_file; approvers: ana"
    assert refusal_to_stand_in(call(), "ana", "ana", "approve") == "ana cannot decide for themself as a stand-in"


def test_four_eyes_holds_for_both_people() -> None:
    asked_by_bob = call(four_eyes=True, requested_by="bob")
    assert "bob asked for this call" in (refusal_to_stand_in(asked_by_bob, "bob", "ana", "approve") or "")
    assert refusal_to_stand_in(asked_by_bob, "bob", "ana", "reject") is None  # withdrawing stays open
    asked_by_ana = call(four_eyes=True, requested_by="ana")
    assert "ana asked for this call" in (refusal_to_stand_in(asked_by_ana, "bob", "ana", "approve") or "")
    assert refusal_to_stand_in(call(requested_by="bob"), "bob", "ana", "approve") is None  # no four eyes: allowed


def test_one_person_one_vote_and_the_delegator_counts_once() -> None:
    assert second_vote_refusal([], [], "bob", "ana") is None
    assert second_vote_refusal(["ana"], [], "bob", "ana") == "ana already approved it; it needs another person"
    assert "bob already approved it themself" in (second_vote_refusal(["bob"], [], "bob", "ana") or "")
    assert "bob already approved it for someone else" in (second_vote_refusal(["ana"], ["bob"], "bob", None) or "")
    assert second_vote_refusal(["ana"], ["bob"], "carol", None) is None


def test_a_hand_over_covers_its_tools_for_its_period_until_it_ends() -> None:
    assert delegators_of([hand_over(tools=["delete_*"])], "bob", "delete_file", NOW) == ["ana"]
    assert delegators_of([hand_over(tools=["send_email"])], "bob", "delete_file", NOW) == []
    assert delegators_of([hand_over()], "bob", "anything", NOW) == ["ana"]
    assert delegators_of([hand_over()], "carol", "delete_file", NOW) == []
    assert delegators_of([hand_over()], "bob", "delete_file", NOW + timedelta(days=1)) == []  # its `until`
    assert delegators_of([hand_over(ended_at=NOW)], "bob", "delete_file", NOW) == []


def test_the_bounds_of_a_hand_over() -> None:
    assert refusal_to_hand_over("ana", "bob", NOW + timedelta(days=30), NOW, []) is None
    assert "at most 30 days" in (refusal_to_hand_over("ana", "bob", NOW + timedelta(days=31), NOW, []) or "")
    assert "not in the future" in (refusal_to_hand_over("ana", "bob", NOW, NOW, []) or "")
    assert "to themself" in (refusal_to_hand_over("ana", "ana", NOW + timedelta(days=1), NOW, []) or "")
    many = [hand_over(id=f"so-{n}") for n in range(20)]
    assert "20 live hand-overs" in (refusal_to_hand_over("ana", "carol", NOW + timedelta(days=1), NOW, many) or "")


def test_the_seal_covers_everything_but_its_end() -> None:
    given = hand_over()
    assert given.sealed_body() == given.model_copy(update={"ended_at": NOW, "seal": "x"}).sealed_body()
    assert given.sealed_body() != given.model_copy(update={"to": "mallory"}).sealed_body()


def test_the_policy_says_where_hand_overs_are_allowed() -> None:
    policy = parse_policy('{"groups": {"staff": ["ana", "bob"]}, "tools": {"delete_*": {"delegation": true},'
                          ' "delete_all": {"delegation": false}}}')
    assert policy.allows_delegation("delete_file") and not policy.allows_delegation("delete_all")
    assert not policy.allows_delegation("send_email")
    assert policy.knows("bob") and not policy.knows("mallory")
    assert parse_policy('{"delegation": true}').allows_delegation("send_email")


def pending(**rules: object) -> Pauses:
    item = PendingCall.model_validate({"call_id": "c1", "kind": "approval", "tool": "delete_file", "args": {"path": "x"},
                                       "args_sha256": "s", "requested_at": NOW, "approvers": ["ana", "carol", "dave"],
                                       **rules})
    return Pauses(open=[item])


def test_a_session_counts_the_stand_in_s_vote_as_the_delegator_s_and_names_both() -> None:
    pauses = pending(required_approvals=2)
    vote = pauses.decide(Approve(call_id="c1", by="bob"), CATALOG, NOW, for_person="ana")
    assert (vote.by, vote.for_person) == ("bob", "ana")
    pauses.apply(vote)
    assert pauses.open[0].approvals == ["ana"] and pauses.open[0].stood_in == ["bob"]
    with pytest.raises(Refusal, match="ana already approved"):
        pauses.decide(Approve(call_id="c1", by="ana"), CATALOG, NOW)
    with pytest.raises(Refusal, match="ana already approved"):
        pauses.decide(Approve(call_id="c1", by="dave"), CATALOG, NOW, for_person="ana")
    settled = pauses.decide(Approve(call_id="c1", by="carol"), CATALOG, NOW)
    assert (settled.by, settled.for_person, settled.outcome) == ("carol", None, "approved")  # type: ignore[union-attr]


def test_a_session_refuses_what_a_stand_in_may_not_do() -> None:
    pauses = pending(four_eyes=True, requested_by="bob")
    with pytest.raises(Refusal, match="four-eyes rule: bob asked for this call"):
        pauses.decide(Approve(call_id="c1", by="bob"), CATALOG, NOW, for_person="ana")
    with pytest.raises(Refusal, match="olga may not decide"):
        pauses.decide(Reject(call_id="c1", by="bob"), CATALOG, NOW, for_person="olga")
    with pytest.raises(Refusal, match="not remembered"):
        pending().decide(Approve(call_id="c1", by="bob", remember={"scope": "tool", "for_seconds": 60}),
                         CATALOG, NOW, for_person="ana")
    rejected = pauses.decide(Reject(call_id="c1", by="bob"), CATALOG, NOW, for_person="ana")
    assert (rejected.by, rejected.for_person) == ("bob", "ana")
