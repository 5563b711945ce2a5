"""No session rule lowers what the operator's policy names for a tool: for any policy rule and any
session rules, every call of the tool is planned with the policy's approval, approvers, count,
four eyes and remembering intact (whenever the policy was written), and a session whose
auto_approve would waive them is refused at start."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings, strategies as st

from activities.tools import CATALOG
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.planning import plan_reply, with_recorded_args, judge
from workflows.policy import OperatorPolicy
from workflows.requests import JudgementRequest
from workflows.session import SessionInput

PEOPLE = ["ana", "bob", "carol", "eve"]
MAIL = {"to": "team@example.com", "subject": "lunch", "body": "noon"}

people = st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=3, unique=True)
tool_rule = st.fixed_dictionaries({}, optional={
    "approval": st.sampled_from(["always", "never", "tool"]),
    "approvers": people,
    "required_approvals": st.integers(1, 2),
    "four_eyes": st.booleans(),
    "remember": st.booleans(),
}).filter(lambda rule: rule.get("required_approvals", 1) <= len(rule.get("approvers", PEOPLE)))
session_rules = st.fixed_dictionaries({}, optional={
    "auto_approve": st.sampled_from([["send_email"], ["send_*"], ["*"]]),
    "require_approval": st.sampled_from([["send_email"], []]),
    "approvers": st.dictionaries(st.sampled_from(["send_email", "*"]), people, min_size=1, max_size=1),
    "required_approvals": st.dictionaries(st.sampled_from(["send_email", "*"]), st.integers(1, 2), max_size=1),
    "four_eyes": st.booleans(),
    "escalate_to": people,
})
policy_key = st.sampled_from(["send_email", "send_*", "*"])


def planned(policy: OperatorPolicy, rules: SessionInput) -> Any:
    reply = ModelReply(tool_calls=[ToolCall(id="m1", function=FunctionCall(name="send_email", arguments=json.dumps(MAIL)))])
    offered = {spec.name: spec for spec in CATALOG.select(None)}
    judgement = judge(JudgementRequest(reply=reply), offered, policy)
    judged = reply.model_copy(update={"catalog_plans": with_recorded_args(judgement.plans, reply)})
    [plan] = plan_reply(judged, offered, rules)
    return plan


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(key=policy_key, rule=tool_rule, rules=session_rules)
def test_no_session_rule_lowers_a_policy_field(key: str, rule: dict[str, Any], rules: dict[str, Any]) -> None:
    policy = OperatorPolicy.model_validate({"tools": {key: rule}})
    session = SessionInput.model_validate({"message": "mail the team", **rules})
    if session.rule_problems():
        return  # refused at start: nobody could satisfy them
    # Not filtered by the start check: a policy may name deciders after the session started.
    floor = policy.floor_for("send_email")
    assert floor is not None
    plan, unruled = planned(policy, session), planned(policy, SessionInput(message="mail the team"))
    if floor.binds_approval or (unruled.action == "approve" and not rules.get("auto_approve")):
        assert plan.action == "approve", (rule, rules, plan)
    assert plan.approvers == floor.approvers
    assert (plan.required_approvals or 1) == floor.required_approvals
    assert bool(plan.four_eyes) == floor.four_eyes
    assert (plan.remember_allowed is not False) == floor.remember


@given(key=policy_key, rule=tool_rule.filter(lambda rule: rule.get("approval") == "always" or rule.get("approval") != "never" and any(
    (key in rule and rule[key] != default) for key, default in
    (("approvers", None), ("required_approvals", 1), ("four_eyes", False), ("remember", True)))))
@settings(max_examples=100, deadline=None, derandomize=True, database=None)
def test_auto_approve_of_a_tool_the_policy_binds_is_refused_at_start(key: str, rule: dict[str, Any]) -> None:
    policy = OperatorPolicy.model_validate({"tools": {key: rule}})
    for entry in ("send_email", "send_*", "*"):
        problems = policy.loosened_by({"auto_approve": [entry]}, CATALOG.names())
        assert any(problem.startswith(f"auto_approve: {entry!r} covers") for problem in problems), (rule, entry)
