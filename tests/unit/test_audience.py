"""Whom a channel shows a pause: those who may decide it among those who may see its session,
by the API's own access rule (activities/audience.py over hitl/access.py)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from activities.audience import deciders_who_may_see
from workflows.policy import OperatorPolicy
from workflows.requests import Notification

POLICY = OperatorPolicy(operators=["@ops"], groups={"ops": ["olga"], "team": ["ana", "dave"]})


def notification(item: dict[str, Any], to: list[str], **people: Any) -> Notification:
    return Notification(session_id="s1", event="requested", to=to, at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                        item={"call_id": "c1", "tool": "ask_user_question", "args": {}, "args_sha256": "0",
                              "requested_by": "bob", **item}, **people)


def test_a_question_goes_to_the_owner_the_participants_as_people_and_the_operators() -> None:
    asked = notification({"kind": "question"}, [], owner="bob", participants=["@team", "carol"])
    assert deciders_who_may_see(asked, POLICY) == ["ana", "bob", "carol", "dave", "olga"]
    assert deciders_who_may_see(asked, None) == ["bob", "carol"]  # no policy: no groups, no operators


def test_an_escalation_of_a_question_reaches_nobody_who_may_not_see_the_session() -> None:
    """A question names no approvers, so `escalate_to` adds no decider: whom it names may not see it."""
    escalated = notification({"kind": "question"}, ["lead", "olga"], owner="bob", participants=[])
    assert deciders_who_may_see(escalated, POLICY) == ["olga"]


def test_a_call_that_names_approvers_goes_to_them_groups_expanded() -> None:
    named = notification({"kind": "approval", "tool": "delete_file", "approvers": ["@team"]}, ["@team"],
                         owner="bob", participants=["carol"])
    assert deciders_who_may_see(named, POLICY) == ["ana", "dave"]


def test_a_notification_from_a_run_that_named_no_session_people_goes_to_whoever_asked() -> None:
    older = notification({"kind": "question"}, [])
    assert deciders_who_may_see(older, None) == ["bob"]
