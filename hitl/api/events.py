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

Whoever listens must still be allowed to read the session each time events are
handed to them (hitl/api/stream_access.py); when they no longer are, their
stream ends with an `end` event that says so, and nothing more is sent.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask
from temporalio.client import Client, WorkflowHandle

from hitl.access import SessionFacts, verdict
from hitl.api.auth import TICKET_SECONDS, bearer_token, identity, signed_in, tokens_of
from hitl.api.oidc import Identity
from hitl.api.gateway import temporal
from hitl.api.guard import Grant, allowed, facts_of, policy_of, refuse_unless
from hitl.api.state import StateUnavailable, state_of
from hitl.api.stream_access import SIGN_IN_EXPIRED, UNCHECKED, Reader, SettledCalls
from hitl.client.events import FASTEST, PAGE, SLOWEST, EventsUnavailable, SessionEvent, follow_event_batches, gap, read_events

router = APIRouter(prefix="/sessions/{session_id}/events", tags=["events"])

PING_SECONDS = 15
END = None  # what a feed hands its listeners when the session is over


@dataclass
class Feed:
    """One session's live events, read by one follower and handed to every listener, with the
    session's facts as they were after those events (one describe per batch, for all listeners)."""

    client: Client
    session_id: str
    listeners: set[asyncio.Queue[list[SessionEvent] | None]] = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    problem: str | None = None
    facts: SessionFacts | None = None  # None until read, and when they could not be read
    settled: SettledCalls = field(default_factory=SettledCalls)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # set: read now, something was sent
    fastest: float = FASTEST
    slowest: float = SLOWEST

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"events feed {self.session_id}")

    async def run(self) -> None:
        try:
            start = await read_events(self.client, self.session_id, 0, 1)
            self.ready.set()
            async for batch in follow_event_batches(self.client, self.session_id, int((start or {}).get("last") or 0),
                                                   fastest=self.fastest, slowest=self.slowest, wake=self.wake):
                # The order is the point: the batch was observed (the query answered) before the
                # describe below is sent, so these facts are at least as new as every event in the
                # batch. A settlement that took someone's access away before a private message was
                # recorded is in the facts that decide whether that message is delivered; facts read
                # before the query could predate it. Calls the events show settled are struck out
                # too, should the memo ever trail the events. A listener checks the feed's newest
                # facts when it takes a batch, so a slow reader is judged by the present, not by
                # the facts of the moment its batch arrived.
                self.settled.note(batch)
                self.facts = await self.read_facts()
                for listener in self.listeners:
                    listener.put_nowait(batch)
        except EventsUnavailable as error:
            self.problem = str(error)
        finally:
            self.ready.set()
            for listener in self.listeners:
                listener.put_nowait(END)

    async def read_facts(self) -> SessionFacts | None:
        return await facts_now(self.client.get_workflow_handle(self.session_id), self.settled)


async def facts_now(handle: WorkflowHandle[Any, Any], settled: SettledCalls) -> SessionFacts | None:
    """The session's facts less the calls the events showed settled; None when the session is
    unknown now or Temporal does not answer: then nobody is given the events."""
    try:
        return settled.trim(await facts_of(handle))
    except HTTPException:
        return None


class Feeds:
    """The feeds of the sessions somebody is watching; a feed stops with its last listener. Each
    reads its session's log between `fastest` and `slowest` seconds apart, and at once when nudged."""

    def __init__(self, fastest: float = FASTEST, slowest: float = SLOWEST) -> None:
        self.feeds: dict[str, Feed] = {}
        self.fastest, self.slowest = fastest, slowest

    def join(self, client: Client, session_id: str) -> tuple[Feed, asyncio.Queue[list[SessionEvent] | None]]:
        feed = self.feeds.get(session_id)
        if feed is None or (feed.task is not None and feed.task.done()):
            feed = self.feeds[session_id] = Feed(client, session_id, fastest=self.fastest, slowest=self.slowest)
            feed.start()
        queue: asyncio.Queue[list[SessionEvent] | None] = asyncio.Queue()
        feed.listeners.add(queue)
        return feed, queue

    def leave(self, feed: Feed, queue: asyncio.Queue[list[SessionEvent] | None]) -> None:
        feed.listeners.discard(queue)
        if not feed.listeners and self.feeds.get(feed.session_id) is feed:
            del self.feeds[feed.session_id]
            if feed.task is not None:
                feed.task.cancel()

    def nudge(self, session_id: str) -> None:
        """Something was just sent to `session_id`: its feed, and the feeds of the sessions it is a
        child of (whose streams show what its pauses lead to), read now rather than after the
        quiet wait."""
        for watched, feed in self.feeds.items():
            if session_id == watched or session_id.startswith(f"{watched}/"):
                feed.wake.set()

    def watched(self) -> dict[str, int]:
        """Listeners per watched session (for tests and operators)."""
        return {session_id: len(feed.listeners) for session_id, feed in self.feeds.items()}


async def stream_reader(
    request: Request,
    session_id: str,
    ticket: str | None = Query(None, description="from POST /sessions/{id}/events/ticket, for EventSource"),
    authorization: str | None = Header(default=None),
) -> Reader:
    if ticket is not None:
        redeemed = await request.app.state.tickets.redeem(ticket, session_id)
        if redeemed is None:
            raise HTTPException(401, "the stream ticket is invalid, expired, used already, or for another session")
        return Reader(signed_in(request, redeemed).person, expires_at=redeemed.expires_at, page=redeemed.page)
    return Reader.of(await identity(request, authorization), bearer_token(authorization))


async def stream_grant(request: Request, session_id: str, reader: Reader = Depends(stream_reader)) -> Grant:
    """The access table's `read`, for a stream's caller (by token or by ticket)."""
    session = await facts_of((await temporal(request).get()).get_workflow_handle(session_id))
    refuse_unless(verdict(reader.person, "read", session, policy_of(request)))
    return Grant(reader.person, session)


def as_sse(event: SessionEvent) -> ServerSentEvent:
    """`event:` is the type, `id:` the session's event id, `data:` the whole event as JSON.
    A resync carries no id: the client's Last-Event-ID stays where its events really stop."""
    body = json.dumps(event.model_dump(mode="json"), ensure_ascii=False)
    return ServerSentEvent(data=body, event=event.type, id=None if event.type == "resync" else str(event.id))


async def backlog(client: Client, session_id: str, after: int) -> AsyncIterator[list[SessionEvent]]:
    """What the session kept after `after`, a page at a time, read once per connection (a resync
    first if it is gone)."""
    while True:
        answer = await read_events(client, session_id, after, PAGE)
        if answer is None:
            return  # the session is between runs: the feed brings what follows
        if (missed := gap(after, answer)) is not None:
            yield [missed]
            after = missed.id
        events = [SessionEvent.model_validate(event) for event in answer.get("events", [])]
        page = [event for event in events if event.id > after]
        if page:
            after = page[-1].id
            yield page
        if len(events) < PAGE:
            return


def ending(reason: str | None, access_ended: bool = False) -> ServerSentEvent:
    """The last event of a stream: why it ends (the session's problem, or the reader's access)."""
    data: dict[str, Any] = {"problem": reason}
    if access_ended:
        data["access_ended"] = True
    return ServerSentEvent(data=json.dumps(data), event="end")


def until_expiry(reader: Reader) -> float | None:
    """Seconds until the reader's OpenID token expires (None: a file's token does not)."""
    return None if reader.expires_at is None else max(reader.expires_at - time.time(), 0)


async def still_signed_in(request: Request, reader: Reader) -> bool:
    """Whether the web sign-in the reader's stream was opened through is live (False for none)."""
    web = getattr(request.app.state, "web_sign_in", None)
    if reader.page is None or web is None:
        return False
    return bool(await web.still_signed_in(state_of(request), reader.page))


async def stream(request: Request, client: Client, session_id: str, after: int, reader: Reader,
                 give_back: Callable[[], Awaitable[None]]) -> AsyncIterator[ServerSentEvent]:
    """Holds one of the person's stream slots (taken by the route) until the stream ends. Before
    each batch the reader's access is asked again, with the policy and tokens the API has now."""
    feeds: Feeds = request.app.state.feeds

    async def refusal(facts: SessionFacts | None) -> str | None:
        try:
            live = await still_signed_in(request, reader)
        except StateUnavailable:
            return UNCHECKED
        return reader.refusal(facts, policy_of(request), tokens_of(request), time.time(), lambda page: live)

    feed, queue = feeds.join(client, session_id)
    try:
        await feed.ready.wait()
        sent = after
        own = SettledCalls()  # the backlog's, as the feed keeps its own
        handle = client.get_workflow_handle(session_id)
        try:
            async for page in backlog(client, session_id, after):
                own.note(page)
                # Read after the page, as the feed reads after a batch (Feed.run says why).
                if (why := await refusal(await facts_now(handle, own))) is not None:
                    yield ending(why, access_ended=True)
                    return
                for event in page:
                    sent = max(sent, event.id)
                    yield as_sse(event)
        except EventsUnavailable as error:
            yield ending(str(error))
            return
        while True:
            try:
                batch = await asyncio.wait_for(queue.get(), until_expiry(reader))
            except asyncio.TimeoutError:  # the reader's sign-in expired while nothing happened
                yield ending(await refusal(feed.facts) or SIGN_IN_EXPIRED, access_ended=True)
                return
            if batch is END:
                yield ending(feed.problem)
                return
            fresh = [event for event in batch if event.type == "resync" or event.id > sent]
            if not fresh:
                continue
            if (why := await refusal(feed.facts)) is not None:
                yield ending(why, access_ended=True)
                return
            for event in fresh:
                sent = max(sent, event.id)
                yield as_sse(event)
    finally:
        feeds.leave(feed, queue)
        await give_back()


@router.get("")
async def events(
    session_id: str,
    request: Request,
    grant: Grant = Depends(stream_grant),
    reader: Reader = Depends(stream_reader),
    last_event_id: int | None = Query(None, description="resume after this id (EventSource sends the header itself)"),
    last_event_header: str | None = Header(None, alias="Last-Event-ID"),
) -> EventSourceResponse:
    """Server-sent events: `pause_opened`, `pause_settled`, `tool_result`, `answer`, `message`, `state`,
    `claimed`, `released`, `refused`; `resync` when events after your Last-Event-ID are gone; `end` when the
    session is over or you may no longer read it (`access_ended`)."""
    after = last_event_id
    if after is None and last_event_header:
        try:
            after = int(last_event_header)
        except ValueError:
            raise HTTPException(422, "Last-Event-ID must be an event id (an integer)") from None
    client = await temporal(request).get()
    give_back = await request.app.state.streams.take(grant.person)  # 429 beyond the person's open streams
    # Given back when the stream ends, or after the response if the stream never began.
    return EventSourceResponse(stream(request, client, session_id, max(after or 0, 0), reader, give_back),
                               ping=PING_SECONDS, background=BackgroundTask(give_back))


@router.post("/ticket")
async def ticket(session_id: str, request: Request, grant: Grant = Depends(allowed("read")),
                 who: Identity = Depends(identity)) -> dict[str, Any]:
    """A ticket for one `GET .../events?ticket=`, for clients that cannot send headers (EventSource):
    good once, for a minute."""
    value, expires = request.app.state.tickets.issue(grant.person, session_id, who.expires_at, who.groups, who.page)
    return {"ticket": value, "expires_in": TICKET_SECONDS, "expires_at": expires,
            "url": f"/sessions/{session_id}/events?ticket={value}"}
