"""A session's input, and what it tells the outside world about itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from workflows.conversation import ChatMessage
from workflows.rules import DecisionRules, Grant

# Whatever a person types joins every later model request, and Temporal caps a
# payload at 2 MB: a bound here keeps one long paste from wedging the session.
MAX_TEXT = 100_000

SessionState = Literal["running", "awaiting_human", "idle", "closed"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant that acts through tools. "
    "When information you need is missing, call ask_user_question instead of guessing. "
    "The result of ask_user_question is the person's own answer: take it as an authoritative fact "
    "and do not re-interpret it. Some tools need a person's approval; when a call is rejected or "
    "cancelled, do not try it again unless the user asks. Answer briefly when you are done."
)


class UserMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    by: str | None = None
    interrupt: bool = False


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = None


AuditEventKind = Literal[
    "requested", "approved", "rejected", "answered", "edited", "refused", "timed_out", "auto_approved", "cancelled"
]


class AuditEvent(BaseModel):
    at: datetime
    event: AuditEventKind
    call_id: str | None = None
    tool: str | None = None
    args_sha256: str | None = None
    by: str | None = None
    reason: str | None = None
    comment: str | None = None
    rule: str | None = None
    signal: str | None = None


class CarriedState(BaseModel):
    """What a session takes into its next run when it continues as new."""

    messages: list[ChatMessage]
    inbox: list[UserMessage]
    grants: list[Grant]
    audit: list[AuditEvent]
    ignored_signals: list[dict[str, Any]]
    turn: int
    total_steps: int
    last_answer: str | None = None
    speaker: str | None = None


class SessionInput(DecisionRules):
    """One JSON object; only `message` is required. The decision rules are inherited."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=MAX_TEXT)
    by: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    max_steps: int = Field(default=20, ge=1, le=1000)
    approval_timeout_seconds: float = Field(default=86400, gt=0)
    answer_timeout_seconds: float = Field(default=86400, gt=0)
    idle_timeout_seconds: float = Field(default=7 * 86400, gt=0)
    continue_as_new_after_events: int = Field(default=10_000, ge=20)
    carried: CarriedState | None = None



class SessionSummary(BaseModel):
    state: SessionState = "closed"
    reason: str
    turns: int
    last_answer: str | None = None


def view(value: BaseModel) -> dict[str, Any]:
    return value.model_dump(mode="json", exclude_none=True)
