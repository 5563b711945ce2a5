"""HitlClient and its Session handle: the Python client of docs/interface.md, "Building on it".

A thin face over what every client of a session already uses: the contract's Updates sent with
retry (hitl/client/updates.py), queries asked again while the buffer is full (queries.py), the
transcript and audit read across runs (sessions.py), the inbox from visibility (inbox.py), the
event feed (events.py: the `events` query followed from Temporal directly, the same feed the
API's SSE stream serves). Results are the contract's typed models; a refusal raises `Refused`;
with no worker polling the session's task queue, reads and decisions raise `NoWorker` at once
(hitl/client/workers.py). `starter.py` reads and decides through it, so the two cannot drift.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, AsyncIterator

from pydantic import BaseModel, ConfigDict, PrivateAttr
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from hitl.client.events import SessionEvent, follow_events, read_events
from hitl.client.inbox import InboxItem, read_inbox
from hitl.client.queries import query_now
from hitl.client.refusals import Refused
from hitl.client.sessions import read_all
from hitl.client.summary import session_summary
from hitl.client.updates import execute_update_retrying
from hitl.client.workers import NoWorker, Polls, no_worker_after, no_worker_line
from hitl.settings import ENCRYPTED, Settings, connect
from workflows.contract import (
    ANSWER, APPROVE, AUDIT_PAGE, CANCEL, PENDING, REJECT, STATUS, TRANSCRIPT_PAGE, USER_MESSAGE, WAIT_UNTIL_SETTLED,
    WORKFLOW, WORKFLOW_RESULT, PendingItem, Query, SessionStatus, Update,
)

VIA = "python"  # the door the audit names for decisions sent through this client
DEFAULT_TASK_QUEUE = "hitl-agent"


class Decision(BaseModel):
    """What an accepted Update answers (workflows/contract.py's Accepted), with attribute access:
    always `accepted`; a decision adds `call_id` and `outcome` (and the votes while more approvals
    are needed), a message the turn and state it joined."""

    model_config = ConfigDict(extra="allow")

    accepted: bool
    call_id: str | None = None
    outcome: str | None = None
    approvals: list[str] | None = None
    required_approvals: int | None = None
    turn: int | None = None
    state: str | None = None
    event: int | None = None
    session_id: str | None = None

    _as_sent: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, answer: dict[str, Any]) -> Decision:
        decision = cls.model_validate(answer)
        decision._as_sent = answer
        return decision

    def as_sent(self) -> dict[str, Any]:
        """The session's answer exactly as it sent it (its keys in its order), as `starter.py` prints it."""
        return self._as_sent


# The reads a session answers, and how each is asked: a query, or a paged query read whole across runs.
READS: dict[str, Query[Any, Any]] = {"pending": PENDING, "status": STATUS}
PAGED_READS: dict[str, tuple[Query[Any, Any], str]] = {"transcript": (TRANSCRIPT_PAGE, "messages"),
                                                       "audit": (AUDIT_PAGE, "events")}
# A run's first workflow task not yet scheduled cannot answer a query; it is asked again this often.
NOT_SCHEDULED_ATTEMPTS, NOT_SCHEDULED_PAUSE_SECONDS = 20, 0.25


class HitlClient:
    """Sessions on one task queue of one Temporal namespace."""

    # Raised by reads and decisions when no worker polls the session's task queue; its message says
    # what to start. Kept here so a program catches it as `HitlClient.NoWorker` from the public face.
    NoWorker = NoWorker

    def __init__(self, client: Client, task_queue: str | None = None, *, via: str = VIA,
                 started_with: str = "HitlClient.start", decisions_wait_for_worker: bool = False) -> None:
        """`via` and `started_with` name this client in the audit and in Temporal's UI (`starter.py`
        gives its own). With no worker polling, reads and decisions raise NoWorker at once;
        `decisions_wait_for_worker` sends decisions anyway, for a caller that bounds the wait and
        tells the person itself (the CLI): the Update then waits in Temporal for a worker."""
        self.temporal = client
        self.task_queue = task_queue or os.environ.get("HITL_TASK_QUEUE") or DEFAULT_TASK_QUEUE
        self.via = via
        self.started_with = started_with
        self.decisions_wait_for_worker = decisions_wait_for_worker

    @classmethod
    async def connect(cls) -> HitlClient:
        """Connected as `starter.py` connects: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE (or Temporal's
        envconfig profile), HITL_TASK_QUEUE, and the payload codec of HITL_ENCRYPTION_KEY."""
        settings = Settings.from_env()
        return cls(await connect(settings), settings.task_queue)

    async def start(self, message: str, session_id: str | None = None, by: str | None = None,
                    **session_input: Any) -> Session:
        """Start a session (the workflow input's other fields as keywords: tools, max_steps, agents, ...)."""
        request: dict[str, Any] = {"message": message, **({"by": by} if by is not None else {}), **session_input}
        session_id = session_id or f"session-{uuid.uuid4().hex[:12]}"
        summary, details = session_summary(request, session_id, started_with=self.started_with, encrypted=ENCRYPTED)
        await self.temporal.start_workflow(  # type: ignore[call-overload]  # plain payloads, not str: see hitl/client/summary.py
            WORKFLOW, request, id=session_id, task_queue=self.task_queue, result_type=WORKFLOW_RESULT,
            static_summary=summary, static_details=details,
        )
        return Session(self, session_id)

    def session(self, session_id: str) -> Session:
        return Session(self, session_id)

    async def inbox(self, for_person: str | None = None) -> list[InboxItem]:
        """Every call waiting for a person in this task queue's sessions (for a person: what they may
        decide), oldest first, from Temporal's visibility (a moment behind the sessions themselves)."""
        return (await read_inbox(self.temporal, task_queue=self.task_queue, person=for_person, limit=None)).items


class Session:
    """One session, by its id (every run of it: the handle carries no run id)."""

    def __init__(self, client: HitlClient, session_id: str) -> None:
        self.client = client
        self.id = session_id
        self.handle = client.temporal.get_workflow_handle(session_id)

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    # ------------------------------------------------------------ reads

    async def pending(self) -> list[PendingItem]:
        return [PendingItem.model_validate(item) for item in await self.read("pending")]

    async def status(self) -> SessionStatus:
        return SessionStatus.model_validate(await self.read("status"))

    async def transcript(self) -> list[dict[str, Any]]:
        """The conversation as OpenAI chat messages, across every run (as the `transcript` query)."""
        return list(await self.read("transcript"))

    async def audit(self) -> list[dict[str, Any]]:
        """Every request and decision, across every run (as the `audit` query)."""
        return list(await self.read("audit"))

    async def read(self, name: str) -> Any:
        """`pending`, `status`, `transcript` or `audit` as the session answers it, in JSON (what
        `starter.py --json` prints): the transcript and audit whole, across every run. With no
        worker to answer, NoWorker says so at once instead of the query's timeout."""
        polls_before: Polls = {}
        await self._worker_polls(polls_before)
        temporal = self.client.temporal
        for attempt in range(1, NOT_SCHEDULED_ATTEMPTS + 1):
            try:
                if name in PAGED_READS:
                    query, key = PAGED_READS[name]
                    return await read_all(temporal, self.id, query.name, key)
                return await query_now(temporal, self.id, READS[name].name)
            except RPCError as error:
                if problem := await no_worker_after(temporal, self.id, error, polls_before):
                    raise NoWorker(problem) from None
                if "not scheduled yet" not in error.message or attempt == NOT_SCHEDULED_ATTEMPTS:
                    raise
                await asyncio.sleep(NOT_SCHEDULED_PAUSE_SECONDS)
        raise AssertionError("unreachable")

    async def events(self, after: int = 0) -> AsyncIterator[SessionEvent]:
        """The session's events after id `after`, as they happen, until it closes (the feed the
        API's SSE stream serves, read from Temporal directly)."""
        async for event in follow_events(self.client.temporal, self.id, after):
            yield event

    async def settled(self, timeout: float | None = None) -> SessionStatus:
        """The status once the session waits for a person, is idle or is closed."""
        return await asyncio.wait_for(self._settled(), timeout)

    # ------------------------------------------------------------ decisions and messages

    async def approve(self, call_id: str | None = None, *, by: str | None = None, args: dict[str, Any] | None = None,
                      changes: dict[str, Any] | None = None, expected_args_sha256: str | None = None,
                      comment: str | None = None) -> Decision:
        """Run the pending call. `changes` names only the arguments that change: merged over the call's
        arguments as `pending` shows them, and sent with their digest, so an edit based on arguments
        that changed in between (another approver's edit) is refused as stale. `args` replaces all
        of the call's arguments (checked against the tool's schema). `expected_args_sha256`: the
        digest of the arguments you decided on (`PendingItem.args_sha256`); refused if they changed."""
        if changes is not None:
            if args is not None:
                raise ValueError("give args (all of the call's arguments) or changes (only those that change), not both")
            call_id, args, read_digest = await self._merged(call_id, changes)
            expected_args_sha256 = expected_args_sha256 or read_digest
        return await self._send(APPROVE.update, {
            "call_id": call_id, "by": by, "args": args, "comment": comment, "expected_args_sha256": expected_args_sha256,
            "via": self.client.via})

    async def reject(self, call_id: str | None = None, *, reason: str | None = None, by: str | None = None) -> Decision:
        return await self._send(REJECT.update, {"call_id": call_id, "by": by, "reason": reason, "via": self.client.via})

    async def answer(self, answer: Any, call_id: str | None = None, *, by: str | None = None) -> Decision:
        return await self._send(ANSWER.update, {"call_id": call_id, "by": by, "answer": answer, "via": self.client.via})

    async def message(self, text: str, *, by: str | None = None) -> Decision:
        return await self._send(USER_MESSAGE.update, {"text": text, "by": by})

    async def cancel(self, reason: str | None = None) -> Decision:
        return await self._send(CANCEL.update, {"reason": reason})

    # ------------------------------------------------------------ the wire

    async def approval_to_edit(self, call_id: str | None = None) -> tuple[str, dict[str, Any], str]:
        """The pending approval an edit is for (the one named, or the only one waiting): its id, its
        arguments and their digest, as `pending` shows them. Refused when there is not exactly one."""
        approvals = [item for item in await self.read("pending")
                     if item["kind"] == "approval" and call_id in (None, item["call_id"])]
        if not approvals:
            raise Refused("not_found", f"no approval {call_id} is pending" if call_id else "no approval is pending")
        if len(approvals) > 1:
            raise Refused("invalid", "several approvals are pending; say which call_id: "
                          + ", ".join(item["call_id"] for item in approvals))
        [item] = approvals
        return item["call_id"], item["args"], item["args_sha256"]

    async def _merged(self, call_id: str | None, changes: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
        call_id, args, digest = await self.approval_to_edit(call_id)
        return call_id, {**args, **changes}, digest

    async def _send(self, update: Update[Any, Any], body: dict[str, Any]) -> Decision:
        payload = {key: value for key, value in body.items() if value is not None}
        if update is ANSWER.update:
            payload.setdefault("answer", body["answer"])  # None is an answer too, and the session judges it
        if not self.client.decisions_wait_for_worker:
            await self._worker_polls()
        try:
            return Decision.of(await execute_update_retrying(self.handle, update, payload))
        except WorkflowUpdateFailedError as error:
            raise Refused.of(error) from None

    async def _worker_polls(self, polls_seen: Polls | None = None) -> None:
        """NoWorker, with the line that says what to start, when no worker polls this session's task
        queue; `polls_seen` is filled with its pollers' last polls."""
        if problem := await no_worker_line(self.client.temporal, self.id, polls_seen=polls_seen):
            raise NoWorker(problem)

    async def _last_event(self, polls_before: Polls) -> int:
        try:
            answer = await read_events(self.client.temporal, self.id, 0, 1)
        except RPCError as error:
            if problem := await no_worker_after(self.client.temporal, self.id, error, polls_before):
                raise NoWorker(problem) from None
            raise
        return int((answer or {}).get("last") or 0)

    async def _settled(self) -> SessionStatus:
        polls_before: Polls = {}
        await self._worker_polls(polls_before)  # else the first read waits for its query's deadline
        while True:
            # The last event before the status is read: a session running now settles after it.
            before = await self._last_event(polls_before)
            try:
                status = await self.status()
            except (RPCError, WorkflowQueryFailedError):
                status = None  # not answerable yet (its first task): the Update waits for the first settle
            # NoWorker passes: with no worker the Update below would wait for ever.
            if status is not None and status.state != "running" and status.queued_messages == 0:
                return status
            try:
                answer = await execute_update_retrying(self.handle, WAIT_UNTIL_SETTLED, {"after_event": before})
            except WorkflowUpdateFailedError as error:
                raise Refused.of(error) from None
            status = SessionStatus.model_validate(answer["status"])
            if status.state != "running":  # `running`: it handed over to a new run; ask again
                return status
