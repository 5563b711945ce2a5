"""Follow one session's events as they happen: the stream the API's SSE and `starter.py watch` share.

The session keeps a log of its newest events (the `events` query: docs/interface.md
and workflows/contract.py): a pause opened or settled, a tool result, an
answer, a state change, each with an id that grows by one for the whole
session, across continue-as-new. Following it is reading that query from the
last id seen: quickly while things happen, more slowly while nothing does
(capped at `slowest`), so one follower costs at most a query a second when idle.
A follower told that something was just sent to the session (`wake`: the API's
feeds, after a decision, a message or a cancel through the API) reads at once
and quickly again, so a person's decision is not followed by a second of silence.

A query is answered by a worker from the workflow's state and is never recorded
in history, so following costs the session nothing. The handle carries no run
id: when the session continues as new, the next read goes to the newest run,
whose log goes on with the same ids.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, AsyncIterator, Mapping

from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from hitl.client.queries import Ask, query_now
from workflows.contract import EVENTS

RESYNC = "resync"
PAGE = 200
FASTEST = 0.05
SLOWEST = 1.0
QUIET_CHECKS = 5
RPC = timedelta(seconds=10)
# Between two runs of a long session, or while a worker restarts, a query fails for a moment.
PASSING = ("not scheduled yet", "workflow task", "no poller", "timeout", "deadline exceeded", "stale")


class SessionEvent(BaseModel):
    """One event of the session's log; `type` is `state`, `pause_opened`, `pause_settled`, `tool_result`,
    `answer`, `message`, `claimed`, `released`, `refused`, or `resync` (made here, not by the session)."""

    model_config = ConfigDict(extra="ignore")

    id: int
    type: str
    at: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def closes_session(self) -> bool:
        return self.type == "state" and self.data.get("state") == "closed"


class EventsUnavailable(Exception):
    """The session cannot be followed: unknown, or its worker has no `events` query."""


def resync(after: int, oldest: int, last: int) -> SessionEvent:
    """Events after `after` are gone from the session's log: the follower should re-read `status` and
    `pending`. Its id is the last id accounted for, so a client resuming from it misses nothing more."""
    accounted = last if last < after else oldest - 1
    return SessionEvent(id=accounted, type=RESYNC, data={"after": after, "oldest": oldest, "last": last})


def gap(after: int, answer: Mapping[str, Any]) -> SessionEvent | None:
    """The resync rule, for every follower (this one, the API's backlog): a `resync` when the `events`
    query's answer no longer keeps the events after `after` (the oldest kept is later than the next
    one) or its ids are behind `after` (a reset); None when the log goes on from `after`."""
    oldest, last = int(answer.get("oldest") or 0), int(answer.get("last") or 0)
    if (oldest and after < oldest - 1) or last < after:
        return resync(after, oldest, last)
    return None


async def follow_events(
    client: Client,
    session_id: str,
    after: int = 0,
    *,
    fastest: float = FASTEST,
    slowest: float = SLOWEST,
    page: int = PAGE,
    wake: asyncio.Event | None = None,
    ask: Ask = query_now,
) -> AsyncIterator[SessionEvent]:
    """Yield the session's events after id `after` as they happen, until the session closes.

    A `resync` event comes first whenever events after `after` are no longer kept (a long absence,
    a client's Last-Event-ID from long ago) or the session's ids are behind `after` (a reset).
    """
    async for batch in follow_event_batches(client, session_id, after, fastest=fastest, slowest=slowest, page=page,
                                            wake=wake, ask=ask):
        for event in batch:
            yield event


async def follow_event_batches(
    client: Client,
    session_id: str,
    after: int = 0,
    *,
    fastest: float = FASTEST,
    slowest: float = SLOWEST,
    page: int = PAGE,
    wake: asyncio.Event | None = None,
    ask: Ask = query_now,
) -> AsyncIterator[list[SessionEvent]]:
    """`follow_events`, one read's new events at a time (a `resync` is a batch of its own): for a
    follower that does something once per read, as the API's streams check access. Setting `wake`
    ends the wait between two reads and starts over from `fastest`."""
    handle = client.get_workflow_handle(session_id)  # no run id: always the newest run
    delay = fastest
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    while True:
        answer = await read_events(client, session_id, after, page, ask)
        events = [SessionEvent.model_validate(event) for event in (answer or {}).get("events", [])]
        if answer is not None and (missed := gap(after, answer)) is not None:
            yield [missed]
            after = missed.id
        batch: list[SessionEvent] = []
        for event in events:
            if event.id <= after:
                continue
            after = event.id
            batch.append(event)
            if event.closes_session:
                yield batch
                return
        if batch:
            yield batch
        if len(events) >= page:
            continue  # more are waiting: read on at once
        if events:
            delay, quiet_since = fastest, loop.time()
        else:  # nothing new, or no answer (a hand-over between runs, a worker restarting)
            delay = min(delay * 2, slowest)
            # A session that ended without a last `state` event (terminated, timed out) says so
            # only to `describe`: asked once per QUIET_CHECKS quiet periods, not on every read.
            if loop.time() - quiet_since >= slowest * QUIET_CHECKS:
                if await has_ended(handle):
                    return
                quiet_since = loop.time()
        if await woken(wake, delay):
            delay, quiet_since = fastest, loop.time()


async def woken(wake: asyncio.Event | None, seconds: float) -> bool:
    """Wait `seconds`, or less when `wake` is set meanwhile (then cleared): whether it was."""
    if wake is None:
        await asyncio.sleep(seconds)
        return False
    try:
        await asyncio.wait_for(wake.wait(), seconds)
    except TimeoutError:
        return False
    wake.clear()
    return True


async def read_events(client: Client, session_id: str, after: int, page: int, ask: Ask = query_now) -> dict[str, Any] | None:
    """One read of the log (`ask`: how a query is sent); None while the answer is only late (a
    hand-over, a worker restarting)."""
    try:
        return await ask(client, session_id, EVENTS.name, {"after": after, "limit": page}, rpc_timeout=RPC)
    except WorkflowQueryFailedError as error:
        if "expected but not found" in str(error):
            raise EventsUnavailable(f"the worker of session {session_id} has no `events` query (an older build)") from None
        raise
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise EventsUnavailable(f"no session {session_id}") from None
        if any(passing in error.message.lower() for passing in PASSING) or error.status in (
            RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.CANCELLED,
        ):
            return None
        raise


async def has_ended(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the newest run is closed for good (a continued-as-new run is followed by the next)."""
    try:
        description = await handle.describe(rpc_timeout=RPC)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return True
        return False
    return description.status not in (None, WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)
