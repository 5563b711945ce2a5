"""Every call waiting for a person, across the namespace, from Temporal's visibility store.

Each session keeps its search attributes and its memo `hitl_pending` current
(docs/production.md, "Finding waiting sessions on your own server"): the memo holds the `pending` items
with their arguments clipped. Listing the executions whose `HitlState` is
`awaiting_human` therefore returns everything an inbox shows, and no session is
queried: a query would make a worker replay every session it no longer caches
(275 s for 10,000 paused sessions; bench/load.py).

A list still costs the server about half a millisecond a row (the dev server's
SQLite, measured in bench/load.py), so an inbox of 10,000 waiting sessions reads
only the oldest ones a person sees first: counts (cheap, no rows) find the
moment `HitlWaitingSince` by which about `limit` sessions waited, and one list
reads the sessions that waited since then or before. Every pause opened before
that moment is in those sessions (a session's `HitlWaitingSince` is its oldest
pause), so the rows are exactly the oldest ones, in order. `limit=None` reads
everything.

Visibility is eventually consistent: a pause opened a moment ago may show a
moment later, and a row may outlive its decision by as long. Deciding goes
through the session's validated Updates, which refuse a call already settled.
The API's `GET /inbox`, `starter.py inbox` and the web page all read this module
(the terminal's rendering is hitl/console/inbox.py).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any, AsyncIterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.api.workflowservice.v1 import CountWorkflowExecutionsRequest, ListWorkflowExecutionsRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from hitl.encryption import why_sealed
from workflows.contract import PendingItem
from workflows.deciders import waits_for

MEMO_KEY = "hitl_pending"
WAITING = 'HitlState = "awaiting_human"'
LIMIT = 100  # items an inbox shows first
WHOLE_LIST_UP_TO = 500  # waiting sessions read in one go without looking for the oldest first
PAGE_SIZE = 1000  # the most a server gives in one page by default (frontend.visibilityMaxPageSize)
RPC = timedelta(seconds=30)
FAR_PAST = timedelta(days=4 * 366)  # nobody waits longer than this: where the search for the oldest starts
FINEST = timedelta(milliseconds=1)


class InboxItem(PendingItem):
    """One open pause as an inbox lists it: the `pending` query's item (workflows/contract.py) as the
    session's memo keeps it (workflows/visibility.py: arguments over 2,000 bytes dropped, no clocks),
    with the session it waits in and for how long it has waited."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, serialize_by_alias=True)

    session_id: str
    # Whom the caller would decide it for, as their stand-in (hitl/api/delegations.py); unset when
    # it is the caller's own to decide.
    for_: str | None = Field(default=None, alias="for")
    args_truncated: bool = False  # the memo drops arguments over 2,000 bytes: `pending` has them whole
    age_seconds: float = 0.0
    # Not in the memo (the reminder and escalation clocks) nor said by the inbox (the API's words on
    # `pending`): left out of the row.
    remind_at: datetime | None = Field(default=None, exclude=True)
    escalate_at: datetime | None = Field(default=None, exclude=True)
    approving: str | None = Field(default=None, exclude=True)
    at_deadline: str | None = Field(default=None, exclude=True)
    # A child's call as its root lists it: the inbox lists the child session itself.
    path: list[str] | None = Field(default=None, exclude=True)
    child_call_id: str | None = Field(default=None, exclude=True)

    def claimed_by_someone_else(self, person: str, now: datetime) -> bool:
        """A live claim by another person; an expired one releases the item, memo or not."""
        if not self.claimed_by or self.claimed_by == person:
            return False
        return self.claim_until is None or self.claim_until > now

    def may_be_decided_by(self, person: str) -> bool:
        """The session's own rules, as far as the row tells them (workflows/deciders.py: approvers,
        four eyes, one vote each). The session has the last word (its validators); this only keeps
        others' items out of sight."""
        return waits_for(self, person)


class InboxUnavailable(Exception):
    """The server cannot answer the inbox's list: its namespace lacks the search attributes."""


class Inbox(BaseModel):
    """What one read of the inbox found, oldest pause first."""

    items: list[InboxItem]
    waiting_sessions: int  # that the person may have something to decide in (a count, not rows)
    sessions: int  # listed: all waiting sessions, or the ones that waited longest
    complete: bool  # every waiting item is in `items`; else only the oldest `limit`
    unreadable: list[str] = Field(default_factory=list)  # listed sessions whose memo had no valid items
    unreadable_because: list[str] = Field(default_factory=list)  # why not, each reason once
    read_at: datetime


def visibility_query(task_queue: str | None = None, person: str | None = None) -> str:
    """The list filter: waiting, still running (a terminated session keeps its last attributes), and
    for a person, sessions whose calls anyone or they may decide (`HitlApprovers` is absent when anyone may)."""
    query = f'{WAITING} AND ExecutionStatus = "Running"'
    if task_queue:
        query += f' AND TaskQueue = "{escaped(task_queue)}"'
    if person:
        query += f' AND (HitlApprovers = "{escaped(person)}" OR HitlApprovers IS NULL)'
    return query


def escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def waited_by(moment: datetime) -> str:
    return f' AND HitlWaitingSince <= "{moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}"'


async def read_inbox(
    client: Client,
    *,
    task_queue: str | None = None,
    person: str | None = None,
    show_claimed: bool = False,
    limit: int | None = LIMIT,
    now: datetime | None = None,
) -> Inbox:
    """The open pauses (for `person`: those they may decide), oldest first: all of them, or the
    oldest `limit` when many sessions wait."""
    now = now or datetime.now(timezone.utc)
    query = visibility_query(task_queue, person)
    try:
        waiting = await count(client, query)
        target = limit or 0
        while True:
            everything = limit is None or waiting <= max(WHOLE_LIST_UP_TO, limit)
            cutoff = None if everything else await oldest_moment(client, query, target, now)
            items, sessions, unreadable, because = await listed(client, query + (waited_by(cutoff) if cutoff else ""))
            if cutoff is not None:  # later pauses of these sessions may have older ones elsewhere
                items = [item for item in items if item.requested_at <= cutoff]
            if person is not None:
                items = for_person(items, person, now, show_claimed=show_claimed)
            if cutoff is None or limit is None or len(items) >= limit or target >= waiting:
                break
            target = (target or 1) * 4  # the person may decide few of the oldest: look further
    except RPCError as error:
        if error.status != RPCStatusCode.INVALID_ARGUMENT or "Hitl" not in error.message:
            raise
        raise InboxUnavailable(
            f"this namespace lacks the sessions' search attributes ({error.message}); create them with "
            "`temporal operator search-attribute create` (docs/production.md, \"Finding waiting sessions on your own server\")"
        ) from None
    for item in items:
        item.age_seconds = max(0.0, (now - item.requested_at).total_seconds())
    items.sort(key=lambda item: (item.requested_at, item.session_id, item.call_id))
    complete = cutoff is None and (limit is None or len(items) <= limit)
    return Inbox(items=items[:limit], waiting_sessions=waiting, sessions=sessions, complete=complete,
                 unreadable=unreadable, unreadable_because=because, read_at=now)


async def count(client: Client, query: str) -> int:
    request = CountWorkflowExecutionsRequest(namespace=client.namespace, query=query)
    return (await client.workflow_service.count_workflow_executions(request, retry=True, timeout=RPC)).count


async def oldest_moment(client: Client, query: str, target: int, now: datetime) -> datetime:
    """About the earliest moment by which `target` sessions were waiting: a binary search on
    `HitlWaitingSince` with counts, from the far past (where counts are small, so cheap) towards now.
    It stops once the count is between `target` and four times that, so the list stays short."""
    early, late = now - FAR_PAST, now
    while late - early > FINEST:
        middle = early + (late - early) / 2
        found = await count(client, query + waited_by(middle))
        if found < target:
            early = middle
        else:
            late = middle
            if found <= 4 * target:
                break
    return late


async def executions(client: Client, query: str) -> AsyncIterator[Any]:
    """Every session a visibility query lists, page after page (the next page is fetched while
    this one is read)."""
    def fetch(token: bytes) -> asyncio.Task[Any]:
        request = ListWorkflowExecutionsRequest(namespace=client.namespace, query=query, page_size=PAGE_SIZE,
                                                next_page_token=token)
        return asyncio.ensure_future(client.workflow_service.list_workflow_executions(request, retry=True, timeout=RPC))

    following: asyncio.Task[Any] | None = fetch(b"")
    while following is not None:
        page = await following
        following = fetch(page.next_page_token) if page.next_page_token else None
        for execution in page.executions:
            yield execution


async def listed(client: Client, query: str) -> tuple[list[InboxItem], int, list[str], list[str]]:
    """One visibility list, decoding each session's memo only: the rest of a row is not needed.
    A memo this client cannot read (encrypted without its key) is counted, with why, not fatal."""
    items: list[InboxItem] = []
    unreadable: list[str] = []
    because: dict[str, None] = {}
    sessions = 0
    async for execution in executions(client, query):
        sessions += 1
        try:
            items.extend(await items_of(client, execution.execution.workflow_id, execution.memo.fields.get(MEMO_KEY)))
        except UnreadableMemo as error:
            unreadable.append(execution.execution.workflow_id)
            because[str(error)] = None
    return items, sessions, unreadable, list(because)


class UnreadableMemo(Exception):
    """A session's memo holds no pending items this client can read; the message says why."""


async def items_of(client: Client, session_id: str, memo: Any) -> list[InboxItem]:
    """The pending items a session's memo holds (decrypted when the payloads are)."""
    if memo is None:
        raise UnreadableMemo("no pending items in its memo")
    codec = client.data_converter.payload_codec
    [opened] = await codec.decode([memo]) if codec else [memo]
    if reason := why_sealed(opened):
        raise UnreadableMemo(reason)
    try:
        [raw] = client.data_converter.payload_converter.from_payloads([opened])
        return [InboxItem.model_validate({**item, "session_id": session_id}) for item in raw]
    except Exception as error:  # noqa: BLE001 - anyone who reaches the frontend writes memos (RuntimeError: an unknown protobuf)
        raise UnreadableMemo(f"its memo's pending items do not parse ({type(error).__name__})") from None


def for_person(items: list[InboxItem], person: str, now: datetime, *, show_claimed: bool = False) -> list[InboxItem]:
    """What `person` may decide: not others' items, not their own request under four eyes, not
    what they already voted on, and not what someone else has claimed unless asked to show claims."""
    return [
        item for item in items
        if item.may_be_decided_by(person) and (show_claimed or not item.claimed_by_someone_else(person, now))
    ]
