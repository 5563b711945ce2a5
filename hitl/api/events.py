"""`GET /sessions/{id}/events`: a session's events as server-sent events, resumable.

One feed per session follows the session's `events` query (hitl/client/events.py,
quick while things happen, at most a query a second while idle), however many
clients listen: a hundred open pages cost the session what one costs. Each new
connection reads its backlog once, from its `Last-Event-ID` (or
`?last_event_id=`), then takes the feed. When the session no longer keeps the
events after that id, the client gets a `resync` event first: re-read `status`
and `pending`, then go on.

A browser's EventSource sends no headers, so besides `Authorization: Bearer`
the stream takes `?ticket=` from `POST /sessions/{id}/events/ticket`: good for
one session's stream, for a minute, and never the bearer token itself.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask
from temporalio.client import Client

from hitl.api.access import verdict
from hitl.api.auth import TICKET_SECONDS, caller
from hitl.api.gateway import temporal
from hitl.api.guard import Grant, allowed, policy_of, refuse_unless, session_facts
from hitl.client.events import PAGE, EventsUnavailable, SessionEvent, follow_events, read_events, resync

router = APIRouter(prefix="/sessions/{session_id}/events", tags=["events"])

PING_SECONDS = 15
END = None  # what a feed hands its listeners when the session is over


@dataclass
class Feed:
    """One session's live events, read by one follower and handed to every listener."""

    client: Client
    session_id: str
    listeners: set[asyncio.Queue[SessionEvent | None]] = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    problem: str | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"events feed {self.session_id}")

    async def run(self) -> None:
        try:
            start = await read_events(self.client.get_workflow_handle(self.session_id), 0, 1)
            self.ready.set()
            async for event in follow_events(self.client, self.session_id, int((start or {}).get("last") or 0)):
                for listener in self.listeners:
                    listener.put_nowait(event)
        except EventsUnavailable as error:
            self.problem = str(error)
        finally:
            self.ready.set()
            for listener in self.listeners:
                listener.put_nowait(END)


class Feeds:
    """The feeds of the sessions somebody is watching; a feed stops with its last listener."""

    def __init__(self) -> None:
        self.feeds: dict[str, Feed] = {}

    def join(self, client: Client, session_id: str) -> tuple[Feed, asyncio.Queue[SessionEvent | None]]:
        feed = self.feeds.get(session_id)
        if feed is None or (feed.task is not None and feed.task.done()):
            feed = self.feeds[session_id] = Feed(client, session_id)
            feed.start()
        queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        feed.listeners.add(queue)
        return feed, queue

    def leave(self, feed: Feed, queue: asyncio.Queue[SessionEvent | None]) -> None:
        feed.listeners.discard(queue)
        if not feed.listeners and self.feeds.get(feed.session_id) is feed:
            del self.feeds[feed.session_id]
            if feed.task is not None:
                feed.task.cancel()

    def watched(self) -> dict[str, int]:
        """Listeners per watched session (for tests and operators)."""
        return {session_id: len(feed.listeners) for session_id, feed in self.feeds.items()}


def stream_caller(
    request: Request,
    session_id: str,
    ticket: str | None = Query(None, description="from POST /sessions/{id}/events/ticket, for EventSource"),
    authorization: str | None = Header(default=None),
) -> str:
    if ticket is not None:
        person = request.app.state.tickets.person_of(ticket, session_id)
        if person is None:
            raise HTTPException(401, "the stream ticket is invalid, expired, used already, or for another session")
        return person
    return caller(request, authorization)


async def stream_grant(request: Request, session_id: str, person: str = Depends(stream_caller)) -> Grant:
    """The access table's `read`, for a stream's caller (by token or by ticket)."""
    session = await session_facts(request, session_id)
    refuse_unless(verdict(person, "read", session, policy_of(request)))
    return Grant(person, session)


def as_sse(event: SessionEvent) -> ServerSentEvent:
    """`event:` is the type, `id:` the session's event id, `data:` the whole event as JSON.
    A resync carries no id: the client's Last-Event-ID stays where its events really stop."""
    body = json.dumps(event.model_dump(mode="json"), ensure_ascii=False)
    return ServerSentEvent(data=body, event=event.type, id=None if event.type == "resync" else str(event.id))


async def backlog(client: Client, session_id: str, after: int) -> AsyncIterator[SessionEvent]:
    """What the session kept after `after`, read once per connection (a resync first if it is gone)."""
    handle = client.get_workflow_handle(session_id)
    while True:
        answer = await read_events(handle, after, PAGE)
        if answer is None:
            return  # the session is between runs: the feed brings what follows
        oldest, last = int(answer.get("oldest") or 0), int(answer.get("last") or 0)
        if (oldest and after < oldest - 1) or last < after:
            gap = resync(after, oldest, last)
            yield gap
            after = gap.id
        events = [SessionEvent.model_validate(event) for event in answer.get("events", [])]
        for event in events:
            if event.id > after:
                after = event.id
                yield event
        if len(events) < PAGE:
            return


async def stream(request: Request, client: Client, session_id: str, after: int,
                 give_back: Callable[[], None]) -> AsyncIterator[ServerSentEvent]:
    """Holds one of the person's stream slots (taken by the route) until the stream ends."""
    feeds: Feeds = request.app.state.feeds
    feed, queue = feeds.join(client, session_id)
    try:
        await feed.ready.wait()
        sent = after
        try:
            async for event in backlog(client, session_id, after):
                sent = max(sent, event.id)
                yield as_sse(event)
        except EventsUnavailable as error:
            yield ServerSentEvent(data=json.dumps({"problem": str(error)}), event="end")
            return
        while True:
            event = await queue.get()
            if event is END:
                yield ServerSentEvent(data=json.dumps({"problem": feed.problem}), event="end")
                return
            if event.type == "resync" or event.id > sent:
                sent = max(sent, event.id)
                yield as_sse(event)
    finally:
        feeds.leave(feed, queue)
        give_back()


@router.get("")
async def events(
    session_id: str,
    request: Request,
    grant: Grant = Depends(stream_grant),
    last_event_id: int | None = Query(None, description="resume after this id (EventSource sends the header itself)"),
    last_event_header: str | None = Header(None, alias="Last-Event-ID"),
) -> EventSourceResponse:
    """Server-sent events: `pause_opened`, `pause_settled`, `tool_result`, `answer`, `message`, `state`,
    `claimed`, `released`, `refused`; `resync` when events after your Last-Event-ID are gone; `end`."""
    after = last_event_id
    if after is None and last_event_header:
        try:
            after = int(last_event_header)
        except ValueError:
            raise HTTPException(422, "Last-Event-ID must be an event id (an integer)") from None
    client = await temporal(request).get()
    give_back = request.app.state.streams.take(grant.person)  # 429 beyond the person's open streams
    # Given back when the stream ends, or after the response if the stream never began.
    return EventSourceResponse(stream(request, client, session_id, max(after or 0, 0), give_back),
                               ping=PING_SECONDS, background=BackgroundTask(give_back))


@router.post("/ticket")
async def ticket(session_id: str, request: Request, grant: Grant = Depends(allowed("read"))) -> dict[str, Any]:
    """A ticket for one `GET .../events?ticket=`, for clients that cannot send headers (EventSource):
    good once, for a minute."""
    value, expires = request.app.state.tickets.issue(grant.person, session_id)
    return {"ticket": value, "expires_in": TICKET_SECONDS, "expires_at": expires,
            "url": f"/sessions/{session_id}/events?ticket={value}"}
