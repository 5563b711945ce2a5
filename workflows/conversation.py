"""The conversation the model sees, in OpenAI chat-completions shapes.

The one invariant the whole product protects lives here: every assistant tool
call is followed by exactly one tool result before anything else is appended.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field


TRIMMED = "[this earlier text was trimmed to keep the conversation within its size limit]"


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
    """What one model call produced: text, tool calls, or both."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class Conversation(BaseModel):
    messages: list[ChatMessage] = Field(default_factory=list)

    def add_user(self, text: str) -> None:
        self._ensure_answered()
        self.messages.append(ChatMessage(role="user", content=text))

    def add_assistant(self, reply: ModelReply) -> None:
        self._ensure_answered()
        self.messages.append(
            ChatMessage(
                role="assistant",
                content=reply.content,
                tool_calls=reply.tool_calls or None,
            )
        )

    def add_tool_result(self, call_id: str, content: str) -> None:
        if call_id not in self.unanswered_call_ids():
            raise ValueError(f"no unanswered tool call {call_id!r}")
        self.messages.append(ChatMessage(role="tool", tool_call_id=call_id, content=content))

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

    def within(self, budget_chars: int) -> list[ChatMessage]:
        """The messages for a model request, trimmed oldest first to fit a budget.

        Every model call carries the whole conversation as its activity input,
        and Temporal refuses payloads over 2 MB: past the budget the oldest
        tool results give way first, then the oldest other texts (never the
        latest message), while the shape (every call, every result) stays.
        """
        trimmed = list(self.messages)
        excess = sum(_size(m) for m in trimmed) - budget_chars
        for roles in (("tool",), ("user", "assistant")):
            for index, message in enumerate(trimmed[:-1]):
                if excess <= 0:
                    return trimmed
                if message.role in roles and len(message.content or "") > len(TRIMMED):
                    excess -= len(message.content or "") - len(TRIMMED)
                    trimmed[index] = message.model_copy(update={"content": TRIMMED})
        return trimmed

    def used_call_ids(self) -> set[str]:
        return {c.id for m in self.messages for c in m.tool_calls or []}

    def _ensure_answered(self) -> None:
        missing = self.unanswered_call_ids()
        if missing:
            raise ValueError(f"tool calls {missing} have no result yet")


def _size(message: ChatMessage) -> int:
    return len(message.content or "") + sum(len(c.function.arguments) for c in message.tool_calls or [])


def answer_as_tool_result(answer: str | dict[str, Any] | list[Any] | int | float | bool) -> str:
    """A human answer, verbatim: a string as it was typed, anything else as JSON."""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
