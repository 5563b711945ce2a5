"""What the workflow hands its activities: the only doors to the world."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from workflows.conversation import ChatMessage


class ModelRequest(BaseModel):
    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    model: str | None = None


class ToolInvocation(BaseModel):
    session_id: str
    call_id: str
    tool: str
    args: dict[str, Any]
