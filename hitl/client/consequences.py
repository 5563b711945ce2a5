"""What a decision on a pending item does, in words for the person about to make it.

A card that says "approve" without saying what happens then leaves a newcomer to guess. Two
sentences are added to a pending item, from what it already holds:

- `approving`: what approving does now, in the tool's own words over its arguments (its
  `effect`, e.g. "deletes notes.txt now"); a tool this process does not know in words (a user
  module's, an MCP server's) "runs <tool> with these arguments now".
- `at_deadline`: what the session does if nobody decides by the item's deadline. It is the
  workflow's own rule (workflows/waiting.py, `on_the_clock`, and workflows/pauses.py,
  `unsettled_text`): the pause is settled as timed out, the tool does not run (a review's result
  is withheld) and the agent reads why.
"""

from __future__ import annotations

from typing import Any

from activities.tools import CATALOG  # the built-in tools, registered with their own words
from hitl.catalog import ToolCatalog

AT_DEADLINE = {
    "approval": "the call is cancelled and the agent is told; the tool does not run",
    "question": "the question is cancelled and the agent is told nobody answered",
    "review": "the result is withheld from the agent, and the agent is told why",
}


def what_approving_does(item: dict[str, Any], catalog: ToolCatalog = CATALOG) -> str | None:
    kind = item.get("kind")
    if kind == "review":
        return "the agent reads this result now (or your edit of it)"
    if kind != "approval":
        return None  # a question is answered, not approved
    tool, args = str(item.get("tool")), item.get("args") or {}
    spec = catalog.get(tool)
    if spec is not None and spec.effect:
        try:
            return spec.effect.format_map({name: _spoken(value) for name, value in args.items()}) + " now"
        except (KeyError, IndexError, ValueError):
            pass  # the template names an argument this call lacks: say it plainly
    return f"runs {tool} with these arguments now"


def what_the_deadline_does(item: dict[str, Any]) -> str | None:
    return AT_DEADLINE.get(str(item.get("kind"))) if item.get("deadline") else None


def with_consequences(item: dict[str, Any], catalog: ToolCatalog = CATALOG) -> dict[str, Any]:
    """The pending item with `approving` and `at_deadline`, each only when it applies."""
    said = {"approving": what_approving_does(item, catalog), "at_deadline": what_the_deadline_does(item)}
    return {**item, **{name: text for name, text in said.items() if text is not None}}


def _spoken(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
