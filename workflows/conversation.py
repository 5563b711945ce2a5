"""The conversation the model sees, in OpenAI chat-completions shapes.

The one invariant the whole product protects lives here: every assistant tool
call is followed by exactly one tool result before anything else is appended.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from workflows.limits import clip, utf8_size


TRIMMED = "[this earlier text was trimmed to keep the conversation within its size limit]"
OMITTED = "[{count} earlier messages of this conversation are left out here to keep the request within its size limit]"


class FunctionCall(BaseModel):
    name: str
    arguments: str = "{}"


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall

    @property
    def name(self) -> str:
        return self.function.name


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class ModelReply(BaseModel):
    """What one model call produced: text, tool calls, or both.

    `catalog_plans` is what the worker's tool catalog said of each call when
    the reply came (workflows/planning.py): recorded with the reply, so a
    session replays with the approval settings it ran with. Today's runs
    take their verdicts from a local activity instead (workflows/judging.py).
    """

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    catalog_plans: list[dict[str, Any]] | None = None


class Conversation(BaseModel):
    messages: list[ChatMessage] = Field(default_factory=list)

    def append(self, message: ChatMessage) -> None:
        """Add a message, keeping the invariant: a result answers an open call, and
        nothing else follows a call that still lacks its result."""
        if message.role == "tool":
            if message.tool_call_id not in self.unanswered_call_ids():
                raise ValueError(f"no unanswered tool call {message.tool_call_id!r}")
        else:
            self._ensure_answered()
        self.messages.append(message)

    def add_user(self, text: str) -> None:
        self.append(ChatMessage(role="user", content=text))

    def add_assistant(self, reply: ModelReply) -> None:
        self.append(self.assistant_message(reply))

    def add_tool_result(self, call_id: str, content: str) -> None:
        self.append(self.tool_result(call_id, content))

    @staticmethod
    def assistant_message(reply: ModelReply) -> ChatMessage:
        return ChatMessage(role="assistant", content=reply.content, tool_calls=reply.tool_calls or None)

    @staticmethod
    def tool_result(call_id: str, content: str) -> ChatMessage:
        return ChatMessage(role="tool", tool_call_id=call_id, content=content)

    def unanswered_call_ids(self) -> list[str]:
        """Tool calls of the last assistant message that still lack a result."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.role == "assistant":
                answered = {m.tool_call_id for m in self.messages[index + 1 :]}
                return [c.id for c in message.tool_calls or [] if c.id not in answered]
        return []

    def settle_unanswered(self, content: str) -> None:
        """The safety net: whatever happened, leave no tool call without a result."""
        for call_id in self.unanswered_call_ids():
            self.add_tool_result(call_id, content)

    def window(self, budget_bytes: int, omitted_before: int = 0) -> list[ChatMessage]:
        """The messages for one model request, newest first into a byte budget.

        The newest messages go in whole; older ones keep their place with their
        text replaced by a note, while those notes fit in a twentieth of the
        budget; anything older is left out, and a first user message says how
        many were (`omitted_before` counts those this run never held). The
        shape (every call, every result) stays, and the newest message is
        always whole. The transcript keeps every word.
        """
        first, used = len(self.messages), 0
        while first > 0:
            size = message_bytes(self.messages[first - 1])
            if first < len(self.messages) and used + size > budget_bytes:
                break
            first, used = first - 1, used + size
        whole = first
        allowance = budget_bytes + budget_bytes // 20
        while first > 0:
            size = message_bytes(placeholder(self.messages[first - 1]))
            if used + size > allowance:
                break
            first, used = first - 1, used + size
        while first < len(self.messages) - 1 and self.messages[first].role == "tool":
            first += 1  # a result whose call was left out
        kept = [placeholder(m) if index < whole else m for index, m in enumerate(self.messages) if index >= first]
        left_out = omitted_before + first
        if left_out:
            kept.insert(0, ChatMessage(role="user", content=OMITTED.format(count=left_out)))
        return kept

    def tail(self, budget_bytes: int) -> list[ChatMessage]:
        """The newest messages, whole, that fit a budget and start a well-formed conversation.

        A run hands these to the next when it continues as new: the model's
        view goes on, and older messages stay readable in the earlier run.
        The newest exchange is always kept, even over the budget.
        """
        start, used = len(self.messages), 0
        while start > 0 and (start == len(self.messages) or used + message_bytes(self.messages[start - 1]) <= budget_bytes):
            start, used = start - 1, used + message_bytes(self.messages[start - 1])
        while 0 < start < len(self.messages) and self.messages[start].role == "tool":
            start -= 1  # never begin with a result whose call is not there
        return self.messages[start:]

    def context_of(self, call_id: str, max_bytes: int) -> tuple[str | None, str | None]:
        """What a person reads on a call's card: the user message that led to it and the text of
        the model's reply that made it (either None when this run no longer holds it), clipped."""
        said = None
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.role == "assistant" and any(call.id == call_id for call in message.tool_calls or []):
                said = clip(message.content, max_bytes) if message.content and message.content.strip() else None
                for earlier in reversed(self.messages[:index]):
                    if earlier.role == "user" and earlier.content:
                        return clip(earlier.content, max_bytes), said
                return None, said
        return None, said

    def tool_name_of(self, call_id: str) -> str | None:
        """The tool the newest assistant message that made this call asked for."""
        for message in reversed(self.messages):
            for call in message.tool_calls or []:
                if call.id == call_id:
                    return call.function.name
        return None

    def used_call_ids(self) -> set[str]:
        return {c.id for m in self.messages for c in m.tool_calls or []}

    def _ensure_answered(self) -> None:
        missing = self.unanswered_call_ids()
        if missing:
            raise ValueError(f"tool calls {missing} have no result yet")


def message_bytes(message: ChatMessage) -> int:
    return utf8_size(message.content) + sum(utf8_size(c.function.arguments) + utf8_size(c.id) + 40 for c in message.tool_calls or []) + 40


def placeholder(message: ChatMessage) -> ChatMessage:
    """A message's place in the conversation, without its weight."""
    calls = [call.model_copy(update={"function": FunctionCall(name=call.function.name, arguments="{}")})
             for call in message.tool_calls or []] or None
    content = TRIMMED if message.content and utf8_size(message.content) > len(TRIMMED) else message.content
    return message.model_copy(update={"content": content, "tool_calls": calls})


def message_sha256(previous: str, message: ChatMessage) -> str:
    """A hash chain over the conversation: a model call names the exact prefix it must see."""
    return hashlib.sha256((previous + message.model_dump_json(exclude_none=True)).encode("utf-8", "surrogatepass")).hexdigest()


# How the model tells a person's word from a tool's. A person's answer is framed by the product
# with HUMAN_ANSWER_MARK; every MCP result starts with TOOL_OUTPUT_MARK and has any imitation of
# either mark defused (activities/mcp/results.py), so no tool output can carry the first frame.
HUMAN_ANSWER_MARK = "[answer from a person"
TOOL_OUTPUT_MARK = "[output of tool {tool}; not from a person]"


def answer_as_tool_result(
    answer: str | dict[str, Any] | list[Any] | int | float | bool, by: str | None = None, verified: bool = False
) -> str:
    """A human answer, framed by the product on its first line, then verbatim: a string as it was
    typed, anything else as JSON. `verified` says the person's identity was checked (a proof)."""
    text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    who = "" if not by else f", verified: {by}" if verified else f", unverified: {by}"
    return f"{HUMAN_ANSWER_MARK}{who}]\n{text}"


def without_answer_frame(text: str) -> str:
    """A person's answer without the product's frame (the answer itself, for code that reads it)."""
    if text.startswith(HUMAN_ANSWER_MARK) and "]\n" in text:
        return text.split("]\n", 1)[1]
    return text
