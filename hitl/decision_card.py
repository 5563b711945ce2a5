"""The card a person needs to decide a pause, as plain text and as simple HTML.

One card for every place that shows a pause outside the web inbox: the mail
(activities/mail.py) and the page an email link opens (hitl/api/decide_links.py).
It says who asked (and whether that is verified), their message, the tool and
what it is, its arguments, why it needs a person, and the deadline. Everything
shown is escaped: the arguments and the message are the model's or a user's.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from typing import Any

ARGS_SHOWN = 4_000  # characters of arguments a card shows; the web inbox shows them whole


def asked_by(item: dict[str, Any]) -> str:
    who = item.get("requested_by") or "someone"
    if item.get("verified") is None:
        return who
    return f"{who} ({'verified' if item['verified'] else 'asserted, not verified'})"


def deadline_shown(deadline: str | None) -> str:
    """A deadline as a person reads it, in UTC to the second ("2026-12-05 20:00:00 UTC"); one that
    cannot be read as a time is shown as it came."""
    if not deadline:
        return "none"
    try:
        when = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return f"{deadline} (UTC)"
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def arguments(item: dict[str, Any]) -> str:
    shown = json.dumps(item.get("args", {}), indent=2, ensure_ascii=False, sort_keys=True)
    return shown if len(shown) <= ARGS_SHOWN else shown[:ARGS_SHOWN] + "\n… (cut: see the web inbox for all of it)"


def rows(item: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) in the order a person reads them; absent facts left out."""
    shown = [("Asked by", asked_by(item))]
    if item.get("led_by"):
        shown.append(("Their message", item["led_by"]))
    if item.get("question"):
        shown.append(("Question", item["question"]))
    shown.append(("Tool", item["tool"] + (f": {item['description']}" if item.get("description") else "")))
    if item.get("because"):
        shown.append(("Why a person", item["because"]))
    if item.get("required_approvals", 1) > 1:
        shown.append(("Approvals", f"{len(item.get('approvals', []))} of {item['required_approvals']} given"))
    shown.append(("Deadline", deadline_shown(item.get("deadline"))))
    return shown


def title(item: dict[str, Any]) -> str:
    what = {"approval": "approve", "review": "review the result of", "question": "answer"}.get(item.get("kind", ""), "decide")
    return f"{item.get('requested_by') or 'A session'} needs you to {what} {item['tool']}"


def card_text(item: dict[str, Any]) -> str:
    lines = [f"{label}: {value}" for label, value in rows(item)]
    return "\n".join([*lines, "Arguments:", arguments(item)])


def card_html(item: dict[str, Any]) -> str:
    cells = "".join(f"<tr><th align=left valign=top>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>"
                    for label, value in rows(item))
    return (f"<table data-role=card>{cells}<tr><th align=left valign=top>Arguments</th>"
            f"<td><pre data-role=args>{html.escape(arguments(item))}</pre></td></tr></table>")
