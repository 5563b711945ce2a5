"""A pause as Slack shows it: the card (Block Kit) and, once settled, how it ended.

The card says what the web inbox's card says (docs/interface.md, "The web inbox"): who asked,
their message, the tool, its arguments, why it needs a person, the deadline; and its choices as
buttons. Each button's value names the session and its chain of runs, the call and the arguments'
digest it was shown with, so a click on a card whose arguments were edited since is refused as
stale, and one in another session started under the same id decides nothing. Slack caps a
section's text at 3000 characters and a button's value at 2000: everything is clipped to fit.

A destructive call's Approve asks first, as the web card's does: Slack shows the button's
confirmation dialog (Block Kit's `confirm` object) and sends the click only once it is confirmed.
"""

from __future__ import annotations

import json
from typing import Any

from hitl.decision_card import asked_by, deadline_shown
from workflows.limits import clip
from workflows.requests import Notification

SECTION_CHARS = 2_900
CHOICES_SHOWN = 20
HEADLINE = {"requested": "needs a person", "reminder": "still waits for a person",
            "escalated": "was escalated to you"}
ENDED = {"approved": "approved", "edited": "approved with edited arguments", "rejected": "rejected",
         "answered": "answered", "declined": "declined", "timed_out": "timed out", "moved_on": "dropped: the user moved on",
         "cancelled": "cancelled"}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SECTION_CHARS)}}


def plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


def button(label: str, action_id: str, value: dict[str, Any], style: str | None = None,
           confirm: dict[str, Any] | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {"type": "button", "text": plain(clip(label, 70)), "action_id": action_id,
                             "value": json.dumps(value)}
    if style:
        shown["style"] = style
    if confirm:
        shown["confirm"] = confirm
    return shown


def confirm_destructive(tool: str) -> dict[str, Any]:
    """Slack's confirmation dialog for approving a destructive tool. Slack caps the title at 100
    characters, the text at 300, and each button at 30: the tool's name is clipped to keep within."""
    return {"title": plain("Approve a destructive call?"),
            "text": plain(f"{clip(tool, 80)} is destructive: once it runs, it cannot be undone. Run it now?"),
            "confirm": plain("Approve and run"), "deny": plain("Cancel"), "style": "danger"}


def card(notification: Notification) -> tuple[str, list[dict[str, Any]]]:
    """The message's fallback text and its blocks."""
    item = notification.item
    tool, kind = item.get("tool", "?"), item.get("kind", "approval")
    what = item.get("question") if kind == "question" else f"`{tool}`"
    headline = f"{what} {HEADLINE.get(notification.event, 'needs a person')}"
    lines = [f"*{clip(headline, 300)}*",
             f"*Asked by:* {asked_by(item)}",
             f"*Session:* `{notification.session_id}`, call `{item.get('call_id', '?')}`"]
    if item.get("led_by"):
        lines.append(f"*Their message:* {clip(item['led_by'], 500)}")
    if item.get("because"):
        lines.append(f"*Why a person:* {clip(item['because'], 300)}")
    if item.get("deadline"):
        lines.append(f"*Deadline:* {deadline_shown(item['deadline'])}")
    blocks = [text_block("\n".join(lines))]
    if kind != "question":
        blocks.append(text_block(f"*Tool:* `{tool}`\n*Arguments:*\n```{json.dumps(item.get('args', {}), indent=2, ensure_ascii=False)}```"))
    blocks.append({"type": "actions", "block_id": "hitl_decision", "elements": choices(notification)})
    return clip(headline, 300), blocks


def choices(notification: Notification) -> list[dict[str, Any]]:
    item = notification.item
    about = {"session": notification.session_id, "chain": notification.chain, "call": item.get("call_id"),
             "sha": item.get("args_sha256")}
    if item.get("kind") == "question":
        offered = [button(choice, f"answer:{index}", {**about, "answer": choice})
                   for index, choice in enumerate((item.get("choices") or [])[:CHOICES_SHOWN])]
        return offered + [button("Decline", "reject", about, "danger")]
    edit = [] if item.get("kind") == "review" else [button("Edit", "edit", about)]
    asked = confirm_destructive(str(item.get("tool", "?"))) if item.get("destructive") else None
    return [button("Approve", "approve", about, "primary", asked), *edit, button("Reject", "reject", about, "danger")]


def ended(notification: Notification) -> tuple[str, list[dict[str, Any]]]:
    """What the card becomes once the pause is settled: the outcome and who decided, through which door."""
    how, item = notification.settled, notification.item
    assert how is not None
    who = f" by {how.by}" if how.by else ""
    door = f" via {how.via}" if how.via else ""
    line = f"`{item.get('tool', '?')}` (call `{item.get('call_id', '?')}`): {ENDED.get(how.outcome, how.outcome)}{who}{door}"
    return clip(line, 300), [text_block(line)]
