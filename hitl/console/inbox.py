"""The inbox as a terminal shows it: a header, then one row per waiting call, oldest first.

What the rows are (read from Temporal's visibility store) is hitl/client/inbox.py;
this is only how `starter.py inbox` prints them.
"""

from __future__ import annotations

from typing import Any

from hitl.client.inbox import Inbox, InboxItem
from hitl.console.render import call_text, relative_deadline

COLUMNS = ("WAITING", "SESSION", "CALL", "KIND", "ASKED BY", "DUE", "WHAT")


def age_text(seconds: float) -> str:
    """An age as a person glances at it: 42s, 7m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def item_text(item: InboxItem) -> str:
    """The call as a person reads it in a terminal row."""
    if item.kind == "question":
        return f"? {item.question or ''}"
    return call_text(item.tool, item.args) + (" (arguments too long to show: `pending` has them)"
                                              if item.args_truncated else "")


def render_inbox(inbox: Inbox, person: str | None = None) -> str:
    """The plain-text inbox: a header, then one line per waiting call, oldest first. ASKED BY says
    whether who asked is proven (verified) or only what a caller said (asserted)."""
    if not inbox.items:
        whom = f" for {person}" if person else ""
        return f"nothing waits{whom} ({plural(inbox.waiting_sessions, 'waiting session')} looked at)"
    rows = []
    for item in inbox.items:
        extras = []
        if item.destructive:
            extras.append("destructive")
        if item.required_approvals > 1:
            extras.append(f"approvals {len(item.approvals)}/{item.required_approvals}")
        if item.approvers:
            extras.append("approvers " + ",".join(item.approvers))
        if item.claimed_by:
            extras.append(f"claimed by {item.claimed_by}")
        more = f"  [{'; '.join(extras)}]" if extras else ""
        who = f"{item.requested_by or 'unnamed'} ({'verified' if item.verified else 'asserted'})"
        due = relative_deadline(item.deadline, inbox.read_at) if item.deadline else "-"
        rows.append((age_text(item.age_seconds), item.session_id, item.call_id, item.kind, who, due,
                     item_text(item) + more))
    widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join([f"{cell:>{widths[0]}}" if i == 0 else f"{cell:<{widths[i]}}" for i, cell in enumerate(row[:-1])]
                       + [row[-1]]) for row in [COLUMNS, *rows]]
    if not inbox.complete:
        lines.append(f"(the oldest {len(inbox.items)}, of {plural(inbox.waiting_sessions, 'waiting session')}; "
                     "--limit 0 shows them all)")
    return "\n".join(lines)


def unreadable_line(inbox: Inbox) -> str:
    """One line for the waiting sessions this client could not read, and why (a key it lacks, most often)."""
    return (f"{plural(len(inbox.unreadable), 'waiting session')} could not be read: "
            + "; ".join(inbox.unreadable_because))


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def inbox_json(inbox: Inbox) -> list[dict[str, Any]]:
    """The rows as `starter.py inbox --json` prints them (the API's `GET /inbox` returns the same models)."""
    return [item.model_dump(mode="json") for item in inbox.items]
