"""The session's contract: every signal, Update, query and activity, with what it takes and returns.

Everything that talks to a session uses these objects, never a string of its own: the clients
(hitl/client, hitl/api, hitl/console, hitl/cli, bench) send `APPROVE.update`, ask
`PENDING.name`; the worker registers the activities these name (activities/ declare them with
`@activity.defn(name=CALL_MODEL.name)`). tests/unit/test_contract.py checks, both ways, that
`AgentWorkflow` registers exactly these handlers and the worker exactly these activities, and
docs/interface.md is checked against them (tests/unit/test_interface_doc.py).

`input` is the model the workflow decodes a payload into (signals and Updates arrive raw and
are decoded by the workflow itself: workflows/agent.py), `result` the shape it answers with.
Results that are JSON objects are described by TypedDicts: they stay plain dicts on the wire
and in every client, and a type checker reads their keys.

Pure (names and models only), so the workflow imports it inside Temporal's sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar

from pydantic import BaseModel, Field

from workflows.agents import ChildPauses
from workflows.conversation import ModelReply
from workflows.events import EventsRequest
from workflows.decisions import Answer, Approve, Claim, Reject, Release
from workflows.requests import (
    ConversationRef,
    FactsRequest,
    Judgement,
    JudgementRequest,
    ModelRequest,
    Notification,
    NotifyReceipt,
    SessionFacts,
    ToolInvocation,
    VerdictRequest,
)
from workflows.pauses import PendingCall
from workflows.session import CancelRequest, SessionInput, SessionState, SessionSummary, UserMessage

In = TypeVar("In")
Out = TypeVar("Out")

WORKFLOW = "AgentWorkflow"  # the workflow type; the workflow id is the session id
START_INPUT = SessionInput  # what a session starts with (`--input`, POST /sessions)
WORKFLOW_RESULT = SessionSummary  # what it returns when it closes


# ------------------------------------------------------------------ results


class Accepted(TypedDict, total=False):
    """What an accepted Update answers: always `accepted`; a decision adds `call_id` and
    `outcome` (and the votes while more approvals are needed), a claim who holds it and until
    when, a message the turn and state it joined."""

    accepted: bool
    call_id: str
    outcome: str
    approvals: list[str]
    required_approvals: int
    claimed_by: str | None
    claim_until: str | None
    turn: int
    state: str
    interrupting: bool
    event: int
    session_id: str  # a decision forwarded to the child session whose call it is


class SessionStatus(BaseModel):
    """The `status` query's answer (GET /sessions/{id}): where the session stands. Every field is
    always there, null when it does not apply, in this order."""

    state: SessionState
    turn: int  # turns begun, the first is 1
    steps: int  # model calls in this turn
    total_steps: int
    last_answer: str | None  # the model's last final answer
    error: str | None  # why the last turn stopped without one
    pending: int  # pauses open now (the `pending` query lists them)
    queued_messages: int  # messages waiting for the next step boundary
    ignored_signals: list[dict[str, Any]]  # the newest refusals: signal, reason, at
    remembered: list[dict[str, Any]]  # approvals remembered and still live
    tools: list[str]  # what the model is offered now
    model: str | None
    closed_reason: str | None
    transcript_messages: int  # across every run
    owner: str | None
    participants: list[str]
    verified: bool  # decisions on this session need the API's proof


class PendingItem(PendingCall):
    """One open pause as the `pending` query answers it (GET /sessions/{id}/pending): the
    PendingCall (workflows/pauses.py) as JSON, without its input schema and with every unset field
    left out (PendingCall.view). The HTTP API adds what approving it does and what its deadline
    does (hitl/client/consequences.py)."""

    input_schema: dict[str, Any] | None = Field(default=None, exclude=True)
    approving: str | None = None
    at_deadline: str | None = None
    # A child session's call, as its root lists it (workflows/delegating.py): the agents on the way
    # down, the child's session id, and the call's id there.
    path: list[str] | None = None
    session_id: str | None = None
    child_call_id: str | None = None


class Settled(TypedDict):
    """`wait_until_settled`'s answer: the session as it stands once it stopped running."""

    status: dict[str, Any]
    pending: list[dict[str, Any]]
    event: int


class Page(TypedDict, total=False):
    """A page of the transcript (`messages`) or the audit (`events`) of one run; items before
    `first_index` are in the run `earlier_run_id`."""

    offset: int
    total: int
    first_index: int
    earlier_run_id: str | None
    messages: list[dict[str, Any]]
    events: list[dict[str, Any]]


class EventsPage(TypedDict):
    """The `events` query's answer: events after the id asked for, the oldest id kept, the last id."""

    events: list[dict[str, Any]]
    oldest: int
    last: int


class PageRequest(BaseModel):
    """`offset` into the whole transcript (or audit); none for the newest page.

    The same fields as workflows/agent.py's PageRequest, which the workflow's queries annotate
    (tests/unit/test_contract.py keeps the two equal until agent.py imports this one)."""

    offset: int | None = None
    limit: int = 200


class SettledRequest(BaseModel):
    """`wait_until_settled` answers once the session stops running after this event id (0: the first turn)."""

    after_event: int = 0


# ---------------------------------------------------------- the vocabulary


@dataclass(frozen=True)
class Signal(Generic[In]):
    """A message into the session that answers nothing; a refused one is recorded
    (`status.ignored_signals`, a `refused` audit event)."""

    name: str
    input: type[In]


@dataclass(frozen=True)
class Update(Generic[In, Out]):
    """A request the session validates before it is recorded: refused with the reason (and a
    code, workflows/pauses.py's RefusalCode) or answered."""

    name: str
    input: type[In]
    result: Any


@dataclass(frozen=True)
class Inbound(Generic[In]):
    """A signal and its Update twin `<signal>_update`: the same input, judged by the same rule;
    the signal records a refusal, the Update's validator rejects with the same reason."""

    signal: Signal[In]
    update: Update[In, Accepted]

    @property
    def verb(self) -> str:
        return self.signal.name


def inbound(name: str, input: type[In]) -> Inbound[In]:
    return Inbound(Signal(name, input), Update(f"{name}_update", input, Accepted))


@dataclass(frozen=True)
class Query(Generic[In, Out]):
    """A read of the session's state, answered by a worker and never recorded in history."""

    name: str
    input: type[In] | None
    result: Any


@dataclass(frozen=True)
class Activity(Generic[In, Out]):
    """A door to the world the workflow opens; a local one runs in the workflow's own worker
    and is recorded as a marker, so nobody outside the worker can answer it."""

    name: str
    input: Any
    result: Any
    local: bool = False


# ------------------------------------------------- signals and their Updates

USER_MESSAGE = inbound("user_message", UserMessage)  # a plain string is a message's text
APPROVE = inbound("approve", Approve)
REJECT = inbound("reject", Reject)
ANSWER = inbound("answer", Answer)  # a plain value answers the one pending question
CANCEL = inbound("cancel", CancelRequest)
CLAIM = inbound("claim", Claim)
RELEASE = inbound("release", Release)
INBOUND: dict[str, Inbound[Any]] = {
    entry.verb: entry for entry in (USER_MESSAGE, APPROVE, REJECT, ANSWER, CANCEL, CLAIM, RELEASE)
}

WAIT_UNTIL_SETTLED: Update[SettledRequest, Settled] = Update("wait_until_settled", SettledRequest, Settled)

# A child session tells its parent what waits in it (workflows/delegating.py); no Update twin: only
# sessions send it, and a report that is not from a running child of the session is ignored.
CHILD_PAUSES: Signal[ChildPauses] = Signal("child_pauses", ChildPauses)

SIGNALS: tuple[Signal[Any], ...] = (*(entry.signal for entry in INBOUND.values()), CHILD_PAUSES)
UPDATES: tuple[Update[Any, Any], ...] = (*(entry.update for entry in INBOUND.values()), WAIT_UNTIL_SETTLED)

# ------------------------------------------------------------------ queries

PENDING: Query[None, list[PendingItem]] = Query("pending", None, list[PendingItem])  # PendingCall.view() each
STATUS: Query[None, SessionStatus] = Query("status", None, SessionStatus)
TRANSCRIPT: Query[None, list[dict[str, Any]]] = Query("transcript", None, list[dict[str, Any]])
TRANSCRIPT_PAGE: Query[PageRequest, Page] = Query("transcript_page", PageRequest, Page)
AUDIT: Query[None, list[dict[str, Any]]] = Query("audit", None, list[dict[str, Any]])
AUDIT_PAGE: Query[PageRequest, Page] = Query("audit_page", PageRequest, Page)
EVENTS: Query[EventsRequest, EventsPage] = Query("events", EventsRequest, EventsPage)
MODEL_CONTEXT: Query[ConversationRef, ModelRequest] = Query("model_context", ConversationRef, ModelRequest)
QUERIES: tuple[Query[Any, Any], ...] = (
    PENDING, STATUS, TRANSCRIPT, TRANSCRIPT_PAGE, AUDIT, AUDIT_PAGE, EVENTS, MODEL_CONTEXT,
)

# --------------------------------------------------------------- activities

CALL_MODEL: Activity[ConversationRef, ModelReply] = Activity("call_model", ConversationRef, ModelReply)
RUN_TOOL: Activity[ToolInvocation, str] = Activity("run_tool", ToolInvocation, str)
NOTIFY: Activity[Notification, NotifyReceipt] = Activity("notify", Notification, NotifyReceipt)
# Local: what the session's own worker knows and judges, recorded so a replay sees the same.
SESSION_ENVIRONMENT: Activity[bool, SessionFacts] = Activity("session_environment", bool, SessionFacts, local=True)
SESSION_FACTS: Activity[FactsRequest, SessionFacts] = Activity("session_facts", FactsRequest, SessionFacts, local=True)
UNKNOWN_TOOLS: Activity[dict[str, Any], list[str]] = Activity("unknown_tools", dict[str, Any], list[str], local=True)
CATALOG_VERDICTS: Activity[VerdictRequest, list[dict[str, Any]]] = Activity(
    "catalog_verdicts", VerdictRequest, list[dict[str, Any]], local=True)
JUDGE_CALLS: Activity[JudgementRequest, Judgement] = Activity("judge_calls", JudgementRequest, Judgement, local=True)
# A handing-over run's transcript index, given and returned: recorded once in its history (workflows/transcript_index.py).
# Runs before hand-over-after-its-index-activity (workflows/patches.py): given and returned, kept in the marker.
KEEP_TRANSCRIPT_INDEX: Activity[dict[str, Any], dict[str, Any]] = Activity(
    "keep_transcript_index", dict[str, Any], dict[str, Any], local=True)
# Runs since: an ordinary activity, the index its recorded input (None when the run has none), its result nothing.
RECORD_TRANSCRIPT_INDEX: Activity[dict[str, Any] | None, None] = Activity(
    "record_transcript_index", dict[str, Any] | None, None)
ACTIVITIES: tuple[Activity[Any, Any], ...] = (
    CALL_MODEL, RUN_TOOL, NOTIFY, SESSION_ENVIRONMENT, SESSION_FACTS, UNKNOWN_TOOLS, CATALOG_VERDICTS, JUDGE_CALLS,
    KEEP_TRANSCRIPT_INDEX, RECORD_TRANSCRIPT_INDEX,
)
