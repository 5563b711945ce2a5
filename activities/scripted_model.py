"""The scripted model (`HITL_MODEL` set to `scripted:PATH`) plays a JSON list of replies, in order.

For testing one's own tools without a model server: each reply is one of

    {"say": "text"}
    {"call": "tool_name", "args": {...}}
    {"calls": [{"call": "tool_name", "args": {...}}, ...], "say"?: "text"}

and past the end it says `(end of script)`. Arguments are sent as written (an
object as its JSON, a string verbatim), so a script can send what a real model
gets wrong: an unknown tool, a missing argument, text that is not JSON.

It keeps no state: where a session is in the script comes from the conversation
the request carries, so every session (a child session too) plays it from the
start, and a worker restart or a replay finds the same place. The position is
the number of the model's earlier replies, counted back from the newest one
whose call ids carry their reply's number (`call_<n>` or `call_<n>_<k>`), so a
conversation whose older messages were left out of the request still counts
right. It is not an LLM, and says so when the worker starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workflows.conversation import ChatMessage, FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest

PREFIX = "scripted:"
END_OF_SCRIPT = "(end of script)"
CALL_ID = re.compile(r"^call_(\d+)(?:_\d+)?$")
# Tools a worker only learns of later: an MCP server's once it is reached, an agent's a session may bring.
OFFERED_LATER = ("mcp__", "delegate__")
SHAPES = '{"say": "text"}, {"call": "tool_name", "args": {...}} or {"calls": [{"call": ..., "args": ...}, ...], "say"?: "text"}'


class ScriptError(ValueError):
    """A script that cannot be played; the message names the file and the reply, in one line."""


@dataclass(frozen=True)
class ScriptedCall:
    tool: str
    arguments: str  # as the model would send them: JSON text, or whatever the script wrote


@dataclass(frozen=True)
class ScriptedReply:
    say: str | None
    calls: tuple[ScriptedCall, ...]

    def as_reply(self, number: int) -> ModelReply:
        """This reply as the model's, its calls numbered after the reply (`number` counts from 1)."""
        several = len(self.calls) > 1
        return ModelReply(content=self.say, tool_calls=[
            ToolCall(id=f"call_{number}_{index}" if several else f"call_{number}",
                     function=FunctionCall(name=call.tool, arguments=call.arguments))
            for index, call in enumerate(self.calls, start=1)
        ])


def sent_as_written(args: Any) -> str:
    """A string goes verbatim (a script may send text that is not JSON); anything else as its JSON."""
    return args if isinstance(args, str) else json.dumps(args)


def parse_call(entry: Any, where: str) -> ScriptedCall:
    if not isinstance(entry, dict) or set(entry) - {"call", "args"} or not isinstance(entry.get("call"), str):
        raise ScriptError(f"{where} is not a call: expected {{\"call\": \"tool_name\", \"args\": {{...}}}}, got {json.dumps(entry)[:200]}")
    return ScriptedCall(entry["call"], sent_as_written(entry.get("args", {})))


def parse_reply(entry: Any, where: str) -> ScriptedReply:
    """One reply of the script, checked shape by shape."""
    if not isinstance(entry, dict):
        raise ScriptError(f"{where} is a JSON {type(entry).__name__}, not an object: each reply is {SHAPES}")
    keys = set(entry)
    say = entry.get("say")
    if say is not None and not isinstance(say, str):
        raise ScriptError(f"{where}: \"say\" must be text")
    if keys <= {"call", "args"} and "call" in keys:
        return ScriptedReply(None, (parse_call(entry, where),))
    if keys <= {"calls", "say"} and "calls" in keys:
        calls = entry["calls"]
        if not isinstance(calls, list) or not calls:
            raise ScriptError(f"{where}: \"calls\" must be a non-empty list of {{\"call\": ..., \"args\": ...}}")
        return ScriptedReply(say, tuple(parse_call(call, f"{where}, call {n}") for n, call in enumerate(calls, start=1)))
    if keys == {"say"}:
        return ScriptedReply(say, ())
    raise ScriptError(f"{where} has keys {sorted(keys)}: each reply is {SHAPES}")


def parse_script(replies: Any, source: str = "the script") -> list[ScriptedReply]:
    if not isinstance(replies, list):
        raise ScriptError(f"{source} must be a JSON list of replies, not a JSON {type(replies).__name__}")
    return [parse_reply(entry, f"{source}: reply {n}") for n, entry in enumerate(replies, start=1)]


def load_script(path: Path) -> list[ScriptedReply]:
    """The script at `path`, or a ScriptError that says in one line what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ScriptError(f"cannot read the model script {path}: {error.strerror or error}") from None
    try:
        replies = json.loads(text)
    except json.JSONDecodeError as error:
        raise ScriptError(f"the model script {path} is not JSON: {error}") from None
    return parse_script(replies, f"the model script {path}")


def replies_so_far(messages: list[ChatMessage]) -> int:
    """How many of the script's replies this conversation already holds."""
    after_anchor = 0
    for message in reversed(messages):
        if message.role != "assistant":
            continue
        numbers = [int(match.group(1)) for call in message.tool_calls or [] if (match := CALL_ID.match(call.id))]
        if numbers:
            return max(numbers) + after_anchor
        after_anchor += 1
    return after_anchor


class ScriptedModel:
    """Plays `replies` to every session from the start; `(end of script)` once they are used up."""

    gen_ai_system = "scripted"

    def __init__(self, replies: list[ScriptedReply], source: str = "a script given in code") -> None:
        self.replies = replies
        self.source = source
        self.default_model = "scripted"
        self.description = (f"a scripted model: {len(replies)} replies from {source}, played in order to every "
                            "session (not an LLM; no endpoint, no key)")

    @classmethod
    def from_setting(cls, setting: str) -> ScriptedModel:
        """`scripted:PATH`, as HITL_MODEL names it."""
        path = Path(setting.removeprefix(PREFIX).strip())
        if not str(path) or str(path) == ".":
            raise ScriptError("HITL_MODEL=scripted: needs a path: scripted:PATH to a JSON list of replies")
        return cls(load_script(path), str(path))

    def check_tools_offered(self, offered: Collection[str]) -> None:
        """A call of a tool the worker lacks would only be refused in every session, which then plays
        on as if it had run: a ScriptError naming those tools and the offered ones, in one line."""
        called = {call.tool for reply in self.replies for call in reply.calls}
        missing = sorted(name for name in called - set(offered) if not name.startswith(OFFERED_LATER))
        if missing:
            raise ScriptError(
                f"the model script {self.source} calls tools this worker does not offer: "
                f"{', '.join(map(repr, missing))} (it offers: {', '.join(sorted(offered))}; "
                "a module of yours goes in HITL_TOOL_MODULES)")

    async def complete(self, request: ModelRequest) -> ModelReply:
        position = replies_so_far(request.messages)
        if position >= len(self.replies):
            return ModelReply(content=END_OF_SCRIPT)
        return self.replies[position].as_reply(position + 1)


def is_scripted(model_setting: str | None) -> bool:
    return bool(model_setting) and str(model_setting).startswith(PREFIX)
