"""How sessions look in a terminal: pending items, status, transcript.

Nothing a model, a tool or another person wrote reaches the terminal raw: a
tool result with `\\x1b[1A\\x1b[2K` would erase the line above it and print
"Approved by ana" in its place (OWASP's "Lies-in-the-Loop": the approver's view
is the target). Every console printer goes through `say` (or `print_json`),
which shows control characters and bidirectional overrides as escapes.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, TextIO

# C0 but newline and tab, DEL, C1, and the bidi embeddings, overrides and isolates.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
TOOL_OUTPUT_PREFIX = "[output of tool "


def shown(text: Any) -> str:
    """`text` as a terminal should show it: control characters written out (`\\x1b`), not obeyed."""
    return CONTROL.sub(lambda match: _escape(match.group()), str(text))


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def say(*parts: Any, sep: str = " ", file: TextIO | None = None, flush: bool = False) -> None:
    """print(), for text that may hold someone else's words."""
    print(shown(sep.join(str(part) for part in parts)), file=file or sys.stdout, flush=flush)


def json_line(value: Any, indent: int | None = None) -> str:
    """JSON whose every control and bidi character is a \\u escape (still valid JSON)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def print_json(value: Any) -> None:
    print(json_line(value, indent=2))


def result_line(content: str | None, width: int = 200) -> str:
    """The first line of a tool result worth showing (past the product's "output of tool" mark),
    cut at `width`, with " …" when more follows."""
    lines = (content or "").strip().splitlines() or [""]
    if lines[0].startswith(TOOL_OUTPUT_PREFIX) and len(lines) > 1:
        lines = lines[1:]
    return lines[0][:width] + (" …" if len(lines) > 1 else "")


def call_text(tool: str, args: dict[str, Any]) -> str:
    inside = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items())
    return f"{tool}({inside})"


def describe_item(item: dict[str, Any]) -> str:
    deadline = f"  (until {item['deadline']})" if item.get("deadline") else ""
    if item["kind"] == "question":
        text = f"? {item.get('question')}"
        if item.get("choices"):
            text += "  [" + " / ".join(item["choices"]) + "]"
        return f"{text}  call_id={item['call_id']}{deadline}"
    text = f"⚠ {call_text(item['tool'], item['args'])} needs {item['kind']}  call_id={item['call_id']}{deadline}"
    if item.get("destructive"):
        text += "  DESTRUCTIVE (its server says so)"
    if item.get("required_approvals", 1) > 1:
        text += f"  approvals {len(item.get('approvals', []))}/{item['required_approvals']}"
    if item.get("result"):
        text += "\n    " + "\n    ".join(item["result"].splitlines())
    return text


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
            if isinstance(args, dict):
                lines.append(f"  → {call_text(call['function']['name'], args)}")
        if content:
            lines.append(f"Agent: {content}")
        return lines
    return []


def render_transcript(messages: list[dict[str, Any]]) -> str:
    return "\n".join(line for message in messages for line in render_message(message))
