"""How sessions look in a terminal: pending items, status, transcript.

Nothing a model, a tool or another person wrote reaches the terminal raw: a
tool result with `\\x1b[1A\\x1b[2K` would erase the line above it and print
"Approved by ana" in its place (OWASP's "Lies-in-the-Loop": the approver's view
is the target). Every console printer goes through `say` (or `print_json`),
which shows control, bidi and other invisible characters as escapes.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from hitl.control_characters import shown, shown_in_json

TOOL_OUTPUT_PREFIX = "[output of tool "
HUMAN_ANSWER_PREFIX = "[answer from a person"  # workflows/conversation.py's HUMAN_ANSWER_MARK


def say(*parts: Any, sep: str = " ", file: TextIO | None = None, flush: bool = False) -> None:
    """print(), for text that may hold someone else's words."""
    print(shown(sep.join(str(part) for part in parts)), file=file or sys.stdout, flush=flush)


def json_line(value: Any, indent: int | None = None) -> str:
    """JSON whose every hidden character (hitl/control_characters.py) is a \\u escape (still valid JSON)."""
    return shown_in_json(json.dumps(value, indent=indent, ensure_ascii=False))


def print_json(value: Any) -> None:
    print(json_line(value, indent=2))


def result_line(content: str | None, width: int = 200) -> str:
    """The first line of a tool result worth showing (past the product's "output of tool" mark),
    cut at `width`, with " …" when more follows."""
    lines = (content or "").strip().splitlines() or [""]
    # Past the product's frames: a tool's "output of tool" mark, a person's "answer from a person"
    # (which no tool output can carry: activities/mcp/results.py defuses imitations).
    if lines[0].startswith((TOOL_OUTPUT_PREFIX, HUMAN_ANSWER_PREFIX)) and len(lines) > 1:
        lines = lines[1:]
    return lines[0][:width] + (" …" if len(lines) > 1 else "")


def call_text(tool: str, args: dict[str, Any]) -> str:
    inside = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items())
    return f"{tool}({inside})"


def relative_deadline(deadline: datetime | str, now: datetime | None = None) -> str:
    """A deadline as a person reads it: "in 42 s", "in 5 min", "in 23 h", "in 3 d", or "overdue"
    (the web inbox's relativeDeadline says the same)."""
    moment = datetime.fromisoformat(deadline.replace("Z", "+00:00")) if isinstance(deadline, str) else deadline
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    seconds = (moment - (now or datetime.now(timezone.utc))).total_seconds()
    if seconds <= 0:
        return "overdue"
    if seconds >= 172800:
        return f"in {int(seconds // 86400)} d"
    if seconds >= 3600:
        return f"in {int(seconds // 3600)} h"
    if seconds >= 60:
        return f"in {int(seconds // 60)} min"
    return f"in {-int(-seconds // 1)} s"


def trust(item: dict[str, Any]) -> str:
    """Whether who asked is proven (a verified session) or only what a caller said."""
    return "verified" if item.get("verified") is True else "asserted"


def asker(item: dict[str, Any]) -> str:
    return f"{item.get('requested_by') or 'someone unnamed'} ({trust(item)})"


def clipped(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def context_lines(item: dict[str, Any], now: datetime | None = None) -> list[str]:
    """What a person needs to decide: who asked and whether that is proven, their message, what the
    model said before the call, what the tool does, why a person is needed, and how long there is.
    Each line only when the session says it."""
    # A sub-agent's call, listed by its root: the agents that asked, then for whom (docs/interface.md).
    first = f"asked by {' › '.join(item['path'])}, for {asker(item)}" if item.get("path") else f"asked by {asker(item)}"
    if item.get("deadline"):
        first += f" · due {relative_deadline(item['deadline'], now)}"
    if item.get("required_approvals", 1) > 1:
        first += f" · approvals {len(item.get('approvals', []))}/{item['required_approvals']}"
    if item.get("approvers"):
        first += " · approvers " + ", ".join(item["approvers"])
    if item.get("claimed_by"):
        first += f" · claimed by {item['claimed_by']}"
    lines = [first]
    if item.get("led_by"):
        lines.append(f"their message: {clipped(item['led_by'])}")
    if item.get("model_text"):
        lines.append(f"the model said: {clipped(item['model_text'])}")
    if item.get("description") or item.get("destructive"):
        what = clipped(item.get("description") or item["tool"], 200)
        lines.append(f"the tool: {what}" + ("  [DESTRUCTIVE]" if item.get("destructive") else ""))
    if item.get("because"):
        lines.append(f"needs a person: {item['because']}")
    return [f"    {line}" for line in lines]


def field_hint(field: dict[str, Any]) -> str:
    """A form field's type as a person types it: "date, YYYY-MM-DD", "economy/business", "integer, optional"."""
    hint = "/".join(str(c) for c in field.get("choices") or []) or field.get("type", "string")
    if field.get("description"):
        hint += f", {field['description']}"
    if not field.get("required", True):
        hint += ", optional"
    return hint


def headline(item: dict[str, Any]) -> str:
    if item["kind"] == "question":
        text = f"? {item.get('question')}"
        if item.get("choices"):
            text += "  [" + " / ".join(item["choices"]) + "]"
        return text
    if item["kind"] == "review":
        return f"⚠ {call_text(item['tool'], item['args'])} ran; review its result before the agent sees it"
    return f"⚠ {call_text(item['tool'], item['args'])} needs approval"


def describe_item(item: dict[str, Any], now: datetime | None = None) -> str:
    lines = [f"{headline(item)}  call_id={item['call_id']}", *context_lines(item, now)]
    for field in item.get("fields") or []:
        lines.append(f"    field {field['name']} ({field_hint(field)})")
    if item.get("result"):
        lines.append("    result:")
        lines += [f"      {line}" for line in item["result"].splitlines()]
    return "\n".join(lines)


def args_diff(original: dict[str, Any], edited: dict[str, Any]) -> list[str]:
    """The arguments a person changed, against the model's: `name: "before" -> "after"`."""
    def value_of(args: dict[str, Any], name: str) -> str:
        return json.dumps(args[name], ensure_ascii=False) if name in args else "(absent)"

    names = list(dict.fromkeys([*original, *edited]))
    return [f"{name}: {value_of(original, name)} -> {value_of(edited, name)}"
            for name in names if original.get(name, ...) != edited.get(name, ...)]


def describe_pending(items: list[dict[str, Any]]) -> str:
    return "\n".join(describe_item(item) for item in items) or "nothing is pending"


def render_status(status: dict[str, Any]) -> str:
    lines = [f"state: {status['state']}   turn {status['turn']}, step {status['steps']}"]
    if status.get("pending"):
        lines.append(f"pending: {status['pending']}")
    if status.get("last_answer"):
        lines.append(f"last answer: {status['last_answer']}")
    if status.get("error"):
        lines.append(f"error: {status['error']}")
    for ignored in status.get("ignored_signals", [])[-5:]:
        lines.append(f"ignored {ignored['signal']}: {ignored['reason']}")
    if status.get("closed_reason"):
        lines.append(f"closed: {status['closed_reason']}")
    return "\n".join(lines)


def render_message(message: dict[str, Any]) -> list[str]:
    role, content = message["role"], message.get("content")
    if role == "user":
        return [f"You: {content}"]
    if role == "tool":
        return [f"  ← {result_line(content)}"]
    if role == "assistant":
        lines = []
        for call in message.get("tool_calls") or []:
            try:
                args = json.loads(call["function"]["arguments"])
            except (json.JSONDecodeError, TypeError):
                args = {"raw": call["function"]["arguments"]}
            if isinstance(args, dict) and call["function"]["name"] == "ask_user_question" and isinstance(args.get("fields"), list):
                # A form reads as its fields and their types, not as its JSON.
                args = {**args, "fields": [f"{f.get('name')}: {f.get('type', 'string')}" for f in args["fields"] if isinstance(f, dict)]}
            if isinstance(args, dict):
                lines.append(f"  → {call_text(call['function']['name'], args)}")
        if content:
            lines.append(f"Agent: {content}")
        return lines
    return []


def render_transcript(messages: list[dict[str, Any]]) -> str:
    return "\n".join(line for message in messages for line in render_message(message))
