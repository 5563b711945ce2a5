"""What the workflow hands its activities: the only doors to the world."""

from __future__ import annotations

from datetime import datetime
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


class Notification(BaseModel):
    """A pause that needs people: sent when it opens, as a reminder, and on escalation."""

    session_id: str
    event: str
    item: dict[str, Any]
    to: list[str]
    at: datetime
