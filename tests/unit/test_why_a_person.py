"""The card's "why a person" names what decided: a tool's flag, or its predicate on these
arguments (issue 37, item 7: a predicate's pause said "the tool's own setting")."""

from __future__ import annotations

import json

from hitl.catalog.specs import ToolCatalog, tool
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.planning import judge
from workflows.requests import JudgementRequest

CATALOG = ToolCatalog()


@tool(needs_approval=lambda args: args.amount > 100, catalog=CATALOG)
def refund_payment(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    return f"refunded {amount} on {order_id}"


@tool(needs_approval=True, catalog=CATALOG)
def close_account(account: str) -> str:
    """Close an account."""
    return f"closed {account}"


def judged(name: str, **args: object) -> dict[str, object]:
    reply = ModelReply(tool_calls=[ToolCall(id="c1", function=FunctionCall(name=name, arguments=json.dumps(args)))])
    offered = {spec.name: spec for spec in CATALOG.select(None)}
    [plan] = judge(JudgementRequest(reply=reply), offered, None).plans
    return plan


def test_a_predicate_that_asks_is_named_as_the_rule_for_these_arguments() -> None:
    plan = judged("refund_payment", order_id="A-17", amount=250)
    assert plan["action"] == "approve"
    assert plan["because"] == "the tool's own rule for these arguments: it needs approval"


def test_a_predicate_that_lets_a_call_run_gives_no_reason() -> None:
    plan = judged("refund_payment", order_id="A-17", amount=50)
    assert plan["action"] == "run" and "because" not in plan


def test_a_flag_is_named_as_the_tool_s_own_setting() -> None:
    plan = judged("close_account", account="acme")
    assert plan["action"] == "approve" and plan["because"] == "the tool's own setting: it needs approval"
