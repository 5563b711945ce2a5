"""The offline model: a deterministic stand-in for an LLM, not an LLM.

It recognises the built-in tools' intents in plain English and speaks the same
tool-calling protocol as a real model, so the whole flow (approvals, questions,
steering, recovery) runs with no endpoint and no key, in the demo and in tests.
It reads only the conversation it is given: no state of its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from workflows.conversation import ChatMessage, FunctionCall, ModelReply, ToolCall, without_answer_frame
from workflows.requests import ModelRequest

DESTINATION_QUESTION = "Where do you want to fly to?"
ORIGIN_QUESTION = "Which city are you departing from?"
DATE_QUESTION = "On what date do you want to fly?"
OLD_DATE_QUESTION = "On what date do you want to fly (YYYY-MM-DD)?"  # asked as free text by earlier builds
# The date is asked as a typed form field: the session refuses "next friday" instead of booking it.
DATE_FIELDS = [{"name": "date", "type": "date", "description": "YYYY-MM-DD"}]
HELP = (
    "I am the offline stand-in model, not an LLM. I can delete a file, send an email, "
    "draft an email, book a flight, or search the workspace documents: try \"delete notes.txt\", "
    "\"send an email to ana@example.com about lunch saying see you at noon\", "
    "\"book me a flight to Beijing\" or \"search for invoices\". "
    "Set OPENAI_API_KEY (and OPENAI_BASE_URL) to use a real model."
)
NOT_RUN_MARKERS = (
    "Rejected by", "No answer within", "The user moved on", "The session", "declined to answer", "Error:",
    "A person rejected this result",
)


class OfflineModel:
    description = "the built-in offline model (a deterministic stand-in, not an LLM)"

    async def complete(self, request: ModelRequest) -> ModelReply:
        tools = {tool["function"]["name"] for tool in request.tools}
        return respond(request.messages, tools)


@dataclass
class Step:
    """One tool call the model made since the user last spoke, and its result."""

    name: str
    args: dict[str, Any]
    result: str


@dataclass
class Turn:
    request: str
    steps: list[Step] = field(default_factory=list)
    calls_so_far: int = 0


def respond(messages: list[ChatMessage], tools: set[str]) -> ModelReply:
    turn = read_turn(messages)
    if turn is None:
        return ModelReply(content=HELP)
    text = turn.request
    lowered = text.lower()
    if "flight" in lowered and ("book" in lowered or "fly" in lowered):
        return book_flight_flow(turn, tools)
    if re.search(r"\b(delete|remove)\b", lowered):
        return single_tool(turn, tools, "delete_file", parse_delete(text))
    if "email" in lowered and "draft" in lowered:
        return single_tool(turn, tools, "draft_email", parse_email(text))
    if "email" in lowered and "send" in lowered:
        return single_tool(turn, tools, "send_email", parse_email(text))
    if re.search(r"\b(search|look up|find)\b", lowered):
        return single_tool(turn, tools, "search_web", parse_search(text))
    return ModelReply(content=HELP)


def read_turn(messages: list[ChatMessage]) -> Turn | None:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last_user is None:
        return None
    turn = Turn(request=messages[last_user].content or "")
    calls: dict[str, ToolCall] = {}
    for message in messages:
        for call in message.tool_calls or []:
            turn.calls_so_far += 1
            calls[call.id] = call
    for message in messages[last_user + 1 :]:
        if message.role == "tool" and message.tool_call_id in calls:
            call = calls[message.tool_call_id]
            turn.steps.append(Step(call.name, _json_object(call.function.arguments), message.content or ""))
    return turn


def single_tool(turn: Turn, tools: set[str], name: str, args: dict[str, Any] | None) -> ModelReply:
    if turn.steps:
        return ModelReply(content=summarise(turn.steps[-1]))
    if name not in tools:
        return ModelReply(content=f"I cannot do that here: the {name} tool is not enabled in this session.")
    if args is None:
        return ModelReply(content=f"I understood you want {name}, but not with what. {HELP}")
    return call(turn, name, args)


def book_flight_flow(turn: Turn, tools: set[str]) -> ModelReply:
    slots = parse_flight(turn.request)
    for step in turn.steps:
        if step.name == "book_flight":
            return ModelReply(content=summarise(step))
        if step.name == "ask_user_question":
            if not_run(step.result):
                return ModelReply(content=f"I cannot book the flight without that answer ({step.result})")
            slots.update(answered_slot(step))
    if "book_flight" not in tools:
        return ModelReply(content="I cannot book flights here: the book_flight tool is not enabled in this session.")
    for slot, question in (("destination", DESTINATION_QUESTION), ("origin", ORIGIN_QUESTION), ("date", DATE_QUESTION)):
        if not slots.get(slot):
            return ask(turn, tools, question, DATE_FIELDS if slot == "date" else None)
    return call(turn, "book_flight", {k: slots[k] for k in ("origin", "destination", "date")})


def ask(turn: Turn, tools: set[str], question: str, fields: list[dict[str, Any]] | None = None) -> ModelReply:
    if "ask_user_question" not in tools:
        return ModelReply(content=f"{question} (YYYY-MM-DD)" if fields else question)
    return call(turn, "ask_user_question", {"question": question, **({"fields": fields} if fields else {})})


def answered_slot(step: Step) -> dict[str, str]:
    answer = without_answer_frame(step.result).strip()
    form = _json_object(answer)
    if form:
        return {k: str(v) for k, v in form.items() if k in ("origin", "destination", "date")}
    question = step.args.get("question", "")
    if question == ORIGIN_QUESTION:
        return {"origin": answer}
    if question in (DATE_QUESTION, OLD_DATE_QUESTION):
        return {"date": normalise_date(answer) or answer}
    if question == DESTINATION_QUESTION:
        return {"destination": answer}
    return {}


def summarise(step: Step) -> str:
    """The final answer after a tool call: what happened, in a sentence."""
    result = step.result
    if not_run(result):
        intent = {
            "delete_file": f"delete {step.args.get('path', 'the file')}",
            "send_email": f"send the email to {step.args.get('to', 'them')}",
            "draft_email": "use the draft",
            "book_flight": f"book the flight to {step.args.get('destination', 'there')}",
            "search_web": "search",
        }.get(step.name, f"run {step.name}")
        if result.startswith("Rejected by"):
            return f"I did not {intent}, as you asked. ({result})"
        return f"I did not {intent}: {result}"
    if step.name == "search_web":
        return f"Here is what I found in the workspace:\n{result}"
    if step.name == "draft_email":
        return f"Here is the draft, as reviewed:\n{result}"
    return result.split("\n\n")[-1]


def not_run(result: str) -> bool:
    return result.startswith(NOT_RUN_MARKERS) or "the tool did not run" in result or "was withheld" in result


def call(turn: Turn, name: str, args: dict[str, Any]) -> ModelReply:
    call_id = f"call_{turn.calls_so_far + 1}"
    return ModelReply(
        tool_calls=[ToolCall(id=call_id, function=FunctionCall(name=name, arguments=json.dumps(args)))]
    )


# ------------------------------------------------------------------ parsing

PLACE = r"([A-Za-z][A-Za-z .'-]*?)"
PLACE_END = r"(?=\s+(?:from|to|on|tomorrow|today|next|please)\b|[.,!?;]|$)"


def parse_flight(text: str) -> dict[str, str]:
    slots: dict[str, str] = {}
    if m := re.search(r"\bto\s+" + PLACE + PLACE_END, text, re.IGNORECASE):
        slots["destination"] = m.group(1).strip()
    if m := re.search(r"\bfrom\s+" + PLACE + PLACE_END, text, re.IGNORECASE):
        slots["origin"] = m.group(1).strip()
    if when := normalise_date(text):
        slots["date"] = when
    return slots


def normalise_date(text: str) -> str | None:
    if m := re.search(r"\b(\d{4}-\d{2}-\d{2})\b", text):
        return m.group(1)
    lowered = text.lower()
    if "tomorrow" in lowered:
        return (date.today() + timedelta(days=1)).isoformat()
    if "today" in lowered:
        return date.today().isoformat()
    return None


def parse_delete(text: str) -> dict[str, Any] | None:
    m = re.search(r"\b(?:delete|remove)\s+(?:the\s+)?(?:file\s+)?[\"'`]?([^\s\"'`]+?)[\"'`]?(?=[\s,!?]|\.?$)", text, re.IGNORECASE)
    return {"path": m.group(1)} if m else None


def parse_email(text: str) -> dict[str, Any] | None:
    to = re.search(r"\bto\s+([^\s,]+@[^\s,]+?)(?=[\s,]|\.?$)", text, re.IGNORECASE)
    if not to:
        return None
    subject = re.search(r"\b(?:about|subject)\s*:?\s+[\"']?(.+?)[\"']?(?=\s+(?:saying|body)\b|$)", text, re.IGNORECASE)
    body = re.search(r"\b(?:saying|body)\s*:?\s+[\"']?(.+?)[\"']?$", text, re.IGNORECASE)
    return {
        "to": to.group(1),
        "subject": subject.group(1).strip() if subject else "(no subject)",
        "body": body.group(1).strip() if body else "",
    }


def parse_search(text: str) -> dict[str, Any] | None:
    m = re.search(r"\b(?:search|look up|find)\s+(?:the\s+workspace\s+)?(?:for\s+)?(.+?)[.?!]?$", text, re.IGNORECASE)
    return {"query": m.group(1)} if m else None


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}
