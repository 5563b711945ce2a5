"""Every call waiting for a person, across the namespace, from one visibility list.

Each session keeps its search attributes and its memo `hitl_pending` current
(INTERFACE.md, "Finding waiting sessions"): the memo holds the `pending` items
with their arguments clipped. Listing the executions whose `HitlState` is
`awaiting_human` therefore returns everything an inbox shows, and no session is
queried: a query would make a worker replay every session it no longer caches
(275 s for 10,000 paused sessions, against one list here; bench/load.py).

Visibility is eventually consistent: a pause opened a moment ago may show a
moment later, and a row may outlive its decision by as long. Deciding goes
through the session's validated Updates, which refuse a call already settled.
The API's `GET /inbox`, `starter.py inbox` and the web page all read this module.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError, RPCStatusCode

from console.render import call_text

MEMO_KEY = "hitl_pending"
WAITING = 'HitlState = "awaiting_human"'


class InboxItem(BaseModel):
    """One open pause: which session and call, what it would do, who may decide, for how long it waits."""

    model_config = ConfigDict(extra="ignore")

    session_id: str
    call_id: str
    kind: Literal["approval", "question", "review"]
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    args_truncated: bool = False  # the memo drops arguments over 2,000 bytes: `pending` has them whole
    args_sha256: str | None = None
    requested_at: datetime
    age_seconds: float = 0.0
    requested_by: str | None = None
    approvers: list[str] | None = None  # None: anyone may decide
    required_approvals: int = 1
    approvals: list[str] = Field(default_factory=list)
    four_eyes: bool = False
    claimed_by: str | None = None
    claim_until: datetime | None = None
    question: str | None = None
    choices: list[str] | None = None
    fields: list[dict[str, Any]] | None = None
    result: str | None = None  # a review's result, clipped in the memo
    deadline: datetime | None = None

    def claimed_by_someone_else(self, person: str, now: datetime) -> bool:
        """A live claim by another person; an expired one releases the item, memo or not."""
        if not self.claimed_by or self.claimed_by == person:
            return False
        return self.claim_until is None or self.claim_until > now

    def may_be_decided_by(self, person: str) -> bool:
        """The session's own rules, as far as the row tells them: approvers, four eyes, one vote each.
        The session has the last word (its validators); this only keeps others' items out of sight."""
        if self.approvers and person not in self.approvers:
            return False
        if self.four_eyes and self.requested_by == person:
            return False
        return person not in self.approvals

    def summary(self) -> str:
        """The call as a person reads it in a terminal row."""
        if self.kind == "question":
            return f"? {self.question or ''}"
        return call_text(self.tool, self.args) + (" (arguments too long to show: `pending` has them)"
                                                   if self.args_truncated else "")


class InboxUnavailable(Exception):
    """The server cannot answer the inbox's list: its namespace lacks the search attributes."""


class Inbox(BaseModel):
    """What one read of the inbox found, oldest pause first."""

    items: list[InboxItem]
    sessions: int  # waiting sessions listed, the ones without a readable memo included
    unreadable: list[str] = Field(default_factory=list)  # listed sessions whose memo had no valid items
    read_at: datetime


def visibility_query(task_queue: str | None = None) -> str:
    """The list filter: waiting and still running (a terminated session keeps its last attributes)."""
    query = f'{WAITING} AND ExecutionStatus = "Running"'
    if task_queue:
        query += f' AND TaskQueue = "{escaped(task_queue)}"'
    return query


def escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


async def read_inbox(
    client: Client,
    *,
    task_queue: str | None = None,
    person: str | None = None,
    show_claimed: bool = False,
    now: datetime | None = None,
) -> Inbox:
    """Every open pause (for `person`: those they may decide), oldest first, from one list."""
    items: list[InboxItem] = []
    unreadable: list[str] = []
    sessions = 0
    try:
        async for execution in client.list_workflows(visibility_query(task_queue)):
            sessions += 1
            found = await items_of(execution)
            if found is None:
                unreadable.append(execution.id)
            items.extend(found or [])
    except RPCError as error:
        if error.status != RPCStatusCode.INVALID_ARGUMENT or "HitlState" not in error.message:
            raise
        raise InboxUnavailable(
            f"this namespace has no HitlState search attribute ({error.message}); create the attributes with "
            "`temporal operator search-attribute create` (README, \"Finding waiting sessions on your own server\")"
        ) from None
    now = now or datetime.now(timezone.utc)
    for item in items:
        item.age_seconds = max(0.0, (now - item.requested_at).total_seconds())
    if person is not None:
        items = for_person(items, person, now, show_claimed=show_claimed)
    items.sort(key=lambda item: (item.requested_at, item.session_id, item.call_id))
    return Inbox(items=items, sessions=sessions, unreadable=unreadable, read_at=now)


async def items_of(execution: WorkflowExecution) -> list[InboxItem] | None:
    """The pending items a session's memo holds; None when it has no memo we can read."""
    raw = await execution.memo_value(MEMO_KEY, None)
    if not isinstance(raw, list):
        return None
    try:
        return [InboxItem.model_validate({**item, "session_id": execution.id}) for item in raw]
    except (ValidationError, TypeError):
        return None


def for_person(items: list[InboxItem], person: str, now: datetime, *, show_claimed: bool = False) -> list[InboxItem]:
    """What `person` may decide: not others' items, not their own request under four eyes, not
    what they already voted on, and not what someone else has claimed unless asked to show claims."""
    return [
        item for item in items
        if item.may_be_decided_by(person) and (show_claimed or not item.claimed_by_someone_else(person, now))
    ]


def age_text(seconds: float) -> str:
    """An age as a person glances at it: 42s, 7m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def render_inbox(inbox: Inbox, person: str | None = None) -> str:
    """The plain-text inbox: one line per waiting call, oldest first."""
    if not inbox.items:
        whom = f" for {person}" if person else ""
        return f"nothing waits{whom} ({inbox.sessions} waiting sessions listed)"
    lines = []
    for item in inbox.items:
        extras = []
        if item.required_approvals > 1:
            extras.append(f"approvals {len(item.approvals)}/{item.required_approvals}")
        if item.approvers:
            extras.append("approvers " + ",".join(item.approvers))
        if item.claimed_by:
            extras.append(f"claimed by {item.claimed_by}")
        more = f"  [{'; '.join(extras)}]" if extras else ""
        lines.append(f"{age_text(item.age_seconds):>4}  {item.session_id}  {item.call_id}  {item.kind:<8}  "
                     f"{item.summary()}{more}")
    return "\n".join(lines)


def inbox_json(inbox: Inbox) -> list[dict[str, Any]]:
    """The rows as `starter.py inbox --json` prints them (the API's `GET /inbox` returns the same models)."""
    return [item.model_dump(mode="json") for item in inbox.items]
