"""Continue-as-new: what one run of a session hands the next, and when.

Temporal ends a run at 50 MB or 51,200 events of history, so a session that
lives long starts a fresh run under the same workflow id: between turns, at a
step boundary inside a long turn, or while it waits for people. The new run
must go on exactly where the old one stopped: the model's recent view, what
waits for whom (with votes and deadlines), remembered grants, queued
messages, the position in the turn. Older transcript pages and audit events
are not carried: they stay readable in the earlier run (see `transcript_page`).

Only the session itself writes this state: a start input that carries it is
refused (see read_input in workflows/starting.py), so nobody can forge a grant or a history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workflows.agents import ChildPauses
from workflows.requests import Pin
from workflows.conversation import ChatMessage, Conversation
from workflows.events import EventLog
from workflows.identity import Verifier
from workflows.limits import AUDIT_CARRIED, CARRY_BUDGET_BYTES, json_size
from workflows.pauses import Pauses
from workflows.planning import PlannedCall
from workflows.rules import Grant
from workflows.session import AuditEvent, UserMessage

HISTORY_BYTES_LIMIT = 12_000_000  # continue as new far before Temporal's 50 MB: one step adds at most ~2 MB
CARRIED_MESSAGES_BYTES = 150_000  # the newest messages a new run starts with; the model's view grows back from there
DECIDED_KEPT = 1_000  # settled call ids remembered for "already settled" refusals
CALL_IDS_KEPT = 5_000  # call ids the model already used, to keep new ones unique
IGNORED_SIGNALS_KEPT = 50


class Step(BaseModel):
    """The tool calls of one model reply that are not all settled yet.

    `ran` is false while the calls wait for decisions, true once the tools
    have run and only reviews of their results are left.
    """

    plans: list[PlannedCall]
    ran: bool = False


class RunState(BaseModel):
    """Everything about a session that outlives a run: the workflow keeps it here, in one object,
    and continue-as-new hands the next run this object whole (shrunk to fit, see `for_next_run`
    and `shrink_to_fit`), so a new field cannot be forgotten at a hand-over.

    Its JSON is the `carried` key of the next run's start input, read back by the same model: a
    field is only ever added, with a default, so inputs that earlier runs wrote still read.
    """

    model_config = ConfigDict(extra="forbid")

    # This run's messages (the next run's: the newest of them), and the whole-transcript index of the first.
    messages: list[ChatMessage]
    first_message_index: int = Field(default=0, ge=0)
    inbox: list[UserMessage] = Field(default_factory=list)  # messages not yet taken into a turn
    grants: list[Grant] = Field(default_factory=list)
    audit: list[AuditEvent] = Field(default_factory=list)
    first_audit_index: int = Field(default=0, ge=0)
    ignored_signals: list[dict[str, Any]] = Field(default_factory=list)
    turn: int = Field(ge=0)
    total_steps: int = Field(ge=0)
    last_answer: str | None = None
    speaker: str | None = None
    # The position inside a turn, when the run ended mid-turn.
    in_turn: bool = False
    steps: int = Field(default=0, ge=0)
    error: str | None = None
    interrupt_requested: bool = False
    step: Step | None = None
    pauses: Pauses = Field(default_factory=Pauses)
    used_call_ids: list[str] = Field(default_factory=list)
    cancel_reason: str | None = None
    idle_until: datetime | None = None
    # Absent (or null) only in inputs written before the event stream, and before verified decisions:
    # `resume` gives such a run the verifier its own start input asks for (see `absent_if_null`).
    events: EventLog = Field(default_factory=EventLog)
    verifier: Verifier = Field(default_factory=Verifier)
    delegations: int = Field(default=0, ge=0)  # child sessions started, for their ids (workflows/delegating.py)
    children: list[str] = Field(default_factory=list)  # child sessions running now
    child_pauses: dict[str, ChildPauses] = Field(default_factory=dict)  # what each reported waits in it
    reports_sent: int = Field(default=0, ge=0)  # this session's reports to its parent, for their `seq`
    audit_reported: int = Field(default=0, ge=0)  # the audit's index up to which a child told its parent its decisions
    pins: dict[str, Pin] = Field(default_factory=dict)  # tools' definitions as this session first saw them
    results_this_turn: list[tuple[str, str]] = Field(default_factory=list)  # (tool, call id) whose output entered
    speaker_asserted: bool = False  # the speaker's `by` is the start input's, unproven (AgentWorkflow)
    # While the session's first message still waits in the inbox (inbox[0]): whether its `by` is only
    # asserted, as the run that started the session found it. Carried, so that a hand-over before
    # the first turn does not turn an asserted author into a verified one. None once taken in.
    first_message_asserted: bool | None = None
    # Who wrote the messages the model read since its last reply, and those before the reply
    # being planned: a remembered approval covers a call only when its requester alone led to it.
    authors_since_reply: list[str | None] = Field(default_factory=list)
    authors_of_reply: list[str | None] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def absent_if_null(cls, data: Any) -> Any:
        """A null `events` or `verifier` reads as absent: not in `model_fields_set`, so `resume`
        tells a state written before verified decisions from one that carries a verifier."""
        if isinstance(data, dict) and any(data.get(key, ...) is None for key in ("events", "verifier")):
            return {key: value for key, value in data.items() if not (key in ("events", "verifier") and value is None)}
        return data

    def live_grants(self, now: datetime) -> list[Grant]:
        return [grant for grant in self.grants if grant.until > now]

    def for_next_run(self, now: datetime) -> RunState:
        """What the next run starts from: grants still live, the newest audit and session events.
        The messages are cut by shrink_to_fit, which knows the payload budget."""
        return self.model_copy(update={
            "grants": self.live_grants(now),
            "audit": newest(self.audit, AUDIT_CARRIED),
            "first_audit_index": self.first_audit_index + max(0, len(self.audit) - AUDIT_CARRIED),
            "events": self.events.carried(),
        })


def fits(carried: RunState) -> bool:
    return json_size(carried.model_dump(mode="json")) <= CARRY_BUDGET_BYTES


def shrink_to_fit(carried: RunState, conversation: Conversation) -> RunState | None:
    """The carried state within the payload budget, giving up old messages first.

    None when even the newest exchange does not fit beside what waits for
    people; the session then waits for those pauses to settle before it
    hands over (their deadlines bound that wait).
    """
    fixed = json_size(carried.model_copy(update={"messages": []}).model_dump(mode="json"))
    room = CARRY_BUDGET_BYTES - fixed
    if room <= 0:
        return None
    messages = conversation.tail(min(room * 3 // 4, CARRIED_MESSAGES_BYTES))
    shrunk = carried.model_copy(update={
        "messages": messages,
        "first_message_index": carried.first_message_index + len(conversation.messages) - len(messages),
    })
    return shrunk if fits(shrunk) else None


def newest(items: list[Any], kept: int) -> list[Any]:
    return items[-kept:] if len(items) > kept else list(items)


__all__ = [
    "AUDIT_CARRIED", "CALL_IDS_KEPT", "DECIDED_KEPT", "HISTORY_BYTES_LIMIT", "IGNORED_SIGNALS_KEPT",
    "RunState", "Step", "fits", "newest", "shrink_to_fit",
]
