"""How sessions look in a terminal: pending items, status, transcript."""

from __future__ import annotations

import json
from typing import Any


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


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
        first = (content or "").strip().splitlines() or [""]
        more = " …" if len(first) > 1 else ""
        return [f"  ← {first[0][:200]}{more}"]
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
