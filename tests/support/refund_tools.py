"""A user's own tool module, written only from the docs' imports (`from hitl import ...`): the
INTERFACE's `my_tools`, for tests/integration/test_building_on_it.py."""

from __future__ import annotations

from hitl import ToolContext, ToolError, tool

REFUNDS: list[tuple[str, float]] = []


@tool(needs_approval=lambda args: args.amount > 100)
def refund_payment(order_id: str, amount: float) -> str:
    """Refund part or all of an order's payment; refunds over 100 need approval."""
    if amount <= 0:
        raise ToolError("the amount must be positive")
    REFUNDS.append((order_id, amount))
    return f"Refunded {amount:.2f} on order {order_id}."


@tool
def order_note(order_id: str, context: ToolContext) -> str:
    """The note kept for an order in the workspace."""
    path = context.workspace / f"{order_id}.txt"
    return path.read_text() if path.exists() else f"no note for {order_id}"
