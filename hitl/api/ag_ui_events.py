"""A session's events and open pauses in AG-UI's words (docs/interface.md, "AG-UI").

The session's event log (hitl/client/events.py) becomes AG-UI events: an
`answer` is an assistant text message, a pause opening is the tool call it is
about, a `tool_result` is TOOL_CALL_RESULT, a `state` change is a state
snapshot; the rest (settlements, votes, claims, refusals) travel as CUSTOM
events named `hitl.<type>`. An open pause becomes an interrupt whose id is the
call id and whose `responseSchema` says what a resume entry may carry for it:
for a pause bound to a tool call, AG-UI's recommended `{"approved", "editedArgs"?}`
(hitl/api/ag_ui_resume.py reads it, and the API's own older shape).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent, CustomEvent, Interrupt, StateSnapshotEvent, TextMessageContentEvent, TextMessageEndEvent,
    TextMessageStartEvent, ToolCallArgsEvent, ToolCallEndEvent, ToolCallResultEvent, ToolCallStartEvent,
)

from hitl.client.consequences import with_consequences
from hitl.client.events import SessionEvent

# AG-UI's core reasons: an approval and a review wait on a decision about a tool call (`tool_call`,
# with its toolCallId); a question needs structured input (`input_required`).
REASONS = {"approval": "tool_call", "question": "input_required", "review": "tool_call"}
# The decisions each kind of pause takes, in the API's words (a resume payload says them either way).
DECISIONS = {"approval": ["approve", "reject"], "question": ["answer", "reject"], "review": ["approve", "reject"]}
FIELD_SCHEMAS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"}, "number": {"type": "number"}, "integer": {"type": "integer"},
    "boolean": {"type": "boolean"}, "date": {"type": "string", "format": "date"},
}


@dataclass
class Translator:
    """Turns one session's events into AG-UI events; remembers which tool calls it has opened, so
    a result is never sent for a call the client has not seen start."""

    session_id: str
    opened: set[str] = field(default_factory=set)

    def events_for(self, event: SessionEvent) -> list[BaseEvent]:
        data = event.data
        if event.type == "answer":
            return self.text(f"{self.session_id}-answer-{event.id}", str(data.get("text") or ""))
        if event.type == "pause_opened" and isinstance(data.get("call_id"), str):
            return self.tool_call(data["call_id"], str(data.get("tool") or "unknown"), data.get("args"))
        if event.type == "tool_result" and isinstance(data.get("call_id"), str):
            call_id = data["call_id"]
            # A call that ran without a pause was never announced: its arguments are not in the event.
            started = [] if call_id in self.opened else self.tool_call(call_id, str(data.get("tool") or "unknown"), None)
            return [*started, ToolCallResultEvent(message_id=f"{call_id}-result", tool_call_id=call_id,
                                                  content=str(data.get("content") or ""), role="tool")]
        if event.type == "state":
            return [StateSnapshotEvent(snapshot={"session_id": self.session_id, "state": data.get("state"),
                                                 "event_id": event.id})]
        if event.type == "message":
            return []  # the user's own message: the client holds it already
        return [CustomEvent(name=f"hitl.{event.type}", value={"id": event.id, **data})]

    def text(self, message_id: str, text: str) -> list[BaseEvent]:
        content = [TextMessageContentEvent(message_id=message_id, delta=text)] if text else []
        return [TextMessageStartEvent(message_id=message_id, role="assistant"), *content,
                TextMessageEndEvent(message_id=message_id)]

    def tool_call(self, call_id: str, tool: str, args: Any) -> list[BaseEvent]:
        if call_id in self.opened:
            return []  # a pause opened again after a restart of its step: the client has it
        self.opened.add(call_id)
        sent = [ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(args, ensure_ascii=False))] if args else []
        return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=tool), *sent, ToolCallEndEvent(tool_call_id=call_id)]


def interrupt_of(item: dict[str, Any]) -> Interrupt:
    """An open pause as an AG-UI interrupt: the call id answers it; the pending item rides in the
    metadata under `hitl`, as GET /sessions/{id}/pending shows it."""
    shown = with_consequences(item)
    kind = str(item.get("kind") or "approval")
    return Interrupt(
        id=item["call_id"], reason=REASONS.get(kind, kind), tool_call_id=item["call_id"],
        message=prompt_of(shown), response_schema=response_schema(item),
        expires_at=item.get("deadline") or None, metadata={"hitl": shown},
    )


def prompt_of(item: dict[str, Any]) -> str:
    if item.get("kind") == "question":
        return str(item.get("question") or "a question for you")
    if item.get("kind") == "review":
        return f"review what {item.get('tool')} returned before the model sees it"
    return f"approve {item.get('tool')}: {item.get('approving') or 'runs it with these arguments'}"


def response_schema(item: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a resume entry's `payload` for this pause (status `resolved`; an entry
    with status `cancelled` rejects it)."""
    kind = str(item.get("kind") or "approval")
    if kind == "question":
        return question_schema(item)
    properties: dict[str, Any] = {"approved": {"type": "boolean"}}
    if kind == "review":
        properties["editedResult"] = {"type": "string", "description": "with approved: the result the model sees instead"}
    else:
        properties["editedArgs"] = {**(item.get("input_schema") or {"type": "object"}),
                                    "description": "with approved: the call's arguments in full (a replacement, "
                                                   "not merged), checked against the tool's schema"}
    properties["reason"] = {"type": "string", "description": "with approved false: what the model is told"}
    properties["comment"] = {"type": "string", "description": "with approved: a note for the model and the audit"}
    if sha := item.get("args_sha256"):
        properties["expectedArgsSha256"] = {
            "type": "string", "const": sha, "default": sha,
            "description": "the digest of the arguments this interrupt shows: sent back, the decision counts only "
                           "while the call's arguments are still these (another person may edit them meanwhile)"}
    return {"type": "object", "properties": properties, "required": ["approved"], "additionalProperties": False}


def question_schema(item: dict[str, Any]) -> dict[str, Any]:
    properties = {
        "decision": {"enum": DECISIONS["question"]},
        "answer": answer_schema(item),
        "reason": {"type": "string", "description": "with reject: what the model is told"},
    }
    return {"type": "object", "properties": properties, "required": ["decision"], "additionalProperties": False}


def answer_schema(item: dict[str, Any]) -> dict[str, Any]:
    """A question's answer: an object of its form's fields, one of its choices, or text."""
    fields = item.get("fields")
    if isinstance(fields, list) and fields:
        properties = {}
        for form_field in fields:
            choices = form_field.get("choices")
            kind = form_field.get("type", "string")
            properties[form_field["name"]] = ({"enum": list(choices)} if choices or kind == "enum"
                                              else dict(FIELD_SCHEMAS.get(kind, {"type": "string"})))
        required = [f["name"] for f in fields if f.get("required", True)]
        return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    if item.get("choices"):
        return {"enum": list(item["choices"])}
    return {"type": "string", "minLength": 1}
