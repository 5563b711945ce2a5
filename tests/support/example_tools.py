"""User-defined tools, written the way the README tells users to write them."""

from __future__ import annotations

from typing import Literal

from activities.tools import ToolError, tool

ATTEMPTS: dict[str, int] = {}


@tool(needs_approval=lambda args: args.amount > 100)
def transfer_money(to: str, amount: float, currency: Literal["EUR", "USD"] = "EUR") -> str:
    """Transfer money to someone; transfers over 100 need approval."""
    return f"Transferred {amount:.2f} {currency} to {to}."


@tool
def flaky_lookup(key: str) -> str:
    """Look something up in a service that fails twice, then answers."""
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if ATTEMPTS[key] < 3:
        raise ConnectionError("the lookup service is down")
    return f"{key} = 42"


@tool
def always_broken(key: str) -> str:
    """A tool whose bug the model should hear about rather than crash the session."""
    raise ZeroDivisionError("division by zero in always_broken")


@tool
async def strict_tool(count: int) -> str:
    """A tool that refuses some inputs with a message for the model."""
    if count < 0:
        raise ToolError("count must not be negative")
    return "ok" * count


@tool
def huge_report(megabytes: int) -> str:
    """Produce a report far too large for any model."""
    return "x" * (megabytes * 1_000_000)
