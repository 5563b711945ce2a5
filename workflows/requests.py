"""What the workflow hands its activities: the only doors to the world."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from workflows.agents import AgentSpec
from workflows.conversation import ChatMessage, ModelReply


class ModelRequest(BaseModel):
    """What a model backend receives: the messages, the tools, the model name."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    model: str | None = None


# A run's first model call reaches a worker that has not seen its conversation, so the activity
# would ask the workflow for it through a query (a round trip through the server and a workflow
# activation: about a third of a short session's activity time). When that conversation is this
# small it rides along instead; the history then holds those few messages twice.
OPENING_BYTES = 8_000


class OpeningMessages(BaseModel):
    """The conversation of a run's first model call, carried with its reference when it weighs at
    most OPENING_BYTES: the request the `model_context` query would answer, less the tools' schemas
    (the activity reads those from its catalog, as the query reads the workflow worker's). The
    activity takes it only when its hash chain ends where the reference says (activities/model_context.py)."""

    system: str
    messages: list[ChatMessage]
    tools: list[str] | None  # the tools as the session named them; None: every tool of the catalog


class ConversationRef(BaseModel):
    """What the model activity receives: which conversation to read, not the conversation.

    The activity reads it with the workflow's `model_context` query (queries
    are not recorded), so the history holds each message once however long the
    turn runs; a run's first call may carry its few messages (`opening`). The
    hash chain makes sure it reads exactly the prefix the workflow meant, even
    if the run moved on meanwhile.
    """

    session_id: str
    run_id: str
    message_count: int
    prefix_sha256: str
    model: str | None = None
    opening: OpeningMessages | None = None

    @model_serializer(mode="wrap")
    def without_absent_opening(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A reference without an opening is recorded as it was before openings existed."""
        data: dict[str, Any] = handler(self)
        if data.get("opening") is None:
            data.pop("opening", None)
        return data


class ToolInvocation(BaseModel):
    session_id: str
    call_id: str
    tool: str
    args: dict[str, Any]
    # A retried call that answers what its MCP server asked: the key, requestState and the answer.
    input: dict[str, Any] | None = None


MESSAGES_PER_NOTICE = 20


class MessageRef(BaseModel):
    """Where a channel showed a pause (a Slack message, a mail), in the channel's own words.

    Returned by the notify activity, whose result anyone who reaches the frontend may complete:
    small, bounded, and checked by its channel before it acts on one (activities/slack.py signs its own)."""

    channel: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,15}$")
    ref: str = Field(max_length=300)


class NotifyReceipt(BaseModel):
    """What the notify activity says it showed: the messages to update once the pause is settled."""

    messages: list[MessageRef] = Field(default_factory=list, max_length=MESSAGES_PER_NOTICE)


class SettledNotice(BaseModel):
    """How a pause ended, for the messages that showed it."""

    outcome: str
    by: str | None = None
    via: str | None = None


class Notification(BaseModel):
    """A pause that needs people: sent when it opens, as a reminder, and on escalation; and,
    `settled`, once it is settled, with the messages that showed it."""

    session_id: str
    event: str
    item: dict[str, Any]
    to: list[str]
    at: datetime
    # The session's chain of runs (its first run's id): what a channel issues to decide the pause
    # (a mail link, a Slack button) names it, and counts in no other session under the same id.
    chain: str | None = None
    settled: SettledNotice | None = None
    messages: list[MessageRef] = Field(default_factory=list)
    # Who the session's people are, for a channel to show the pause to those alone who may see it
    # (hitl/access.py's rule). None from a run started before the workflow said so.
    owner: str | None = None
    participants: list[str] | None = None
    # Stand-ins of the people it is for (delegate -> delegator, workflows/stand_ins.py): filled by
    # the notify activity from the book of stand-ins, never sent by the workflow.
    stand_ins: dict[str, str] | None = Field(default=None, exclude=True)


class SessionFacts(BaseModel):
    """What a run learns from its worker when it starts (a recorded local activity):
    which search attributes the server has registered, which keys sign decisions, and
    what in the session's input the operator's policy refuses."""

    registered_search_attributes: list[str] = []
    trusted_keys: dict[str, str] = {}
    policy_problems: list[str] = []
    # Whether the carried state is this product's own (FactsRequest.continued_from), and why not.
    carried_proven: bool = False
    carried_problem: str | None = None
    agents: dict[str, AgentSpec] = {}  # the operator's (HITL_AGENTS), as the worker reads it now


class FactsRequest(BaseModel):
    """What the `session_facts` local activity needs to judge a starting run."""

    verified_decisions: bool
    rules: dict[str, Any] = {}  # the session's decision rules and verified_decisions, as given
    # The run this one continued from, when it starts with carried state: the worker asks the
    # server whether that run was this product's own (activities/session_environment.py).
    continued_from: str | None = None


class Pin(BaseModel):
    """A tool's definition as a session first saw it (tools whose definition lives outside
    this code: MCP), and whether that definition needed a person."""

    sha256: str
    needed_approval: bool
    accepted: bool = False  # an operator accepted this definition in place of the one first seen


class JudgementRequest(BaseModel):
    """A model reply for the worker to judge (a local activity: see AgentWorkflow.judge_calls):
    its catalog and the operator's policy, the pins of the tools it calls, and the tools whose
    results entered this turn (untrusted output)."""

    reply: ModelReply
    tools: list[str] | None = None
    pins: dict[str, Pin] = {}
    results_this_turn: list[tuple[str, str]] = []  # (tool, call id), oldest first
    delegates: dict[str, str] = {}  # the session's delegate tools offered, each with its agent's name


class Judgement(BaseModel):
    plans: list[dict[str, Any]]
    new_pins: dict[str, Pin] = {}
    # The SHA-256 of the operator's policy file these verdicts applied (None: no policy), for the
    # evidence bundle; the workflow does not read it.
    policy_sha256: str | None = None


class VerdictRequest(BaseModel):
    """A model reply whose calls the worker's catalog judges, as offered to a session with `tools`
    (None: all). Asked by a local activity: see AgentWorkflow.judge_calls."""

    reply: ModelReply
    tools: list[str] | None = None
