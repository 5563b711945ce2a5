"""HitlClient and its Session handle: the Python client of docs/interface.md, "Building on it".

A thin face over what every client of a session already uses: the contract's Updates sent with
retry (hitl/client/updates.py), queries asked again while the buffer is full (queries.py), the
transcript and audit read across runs (sessions.py), the inbox from visibility (inbox.py), the
event feed (events.py: the `events` query followed from Temporal directly, the same feed the
API's SSE stream serves). Results are the contract's typed models; a refusal raises `Refused`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, AsyncIterator

from pydantic import BaseModel, ConfigDict
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from hitl.client.events import SessionEvent, follow_events, read_events
from hitl.client.inbox import InboxItem, read_inbox
from hitl.client.queries import query_now
from hitl.client.refusals import Refused
from hitl.client.sessions import read_all
from hitl.client.summary import session_summary
from hitl.client.updates import execute_update_retrying
from hitl.settings import ENCRYPTED, Settings, connect
from workflows.contract import (
    ANSWER, APPROVE, AUDIT_PAGE, CANCEL, PENDING, REJECT, STATUS, TRANSCRIPT_PAGE, USER_MESSAGE, WAIT_UNTIL_SETTLED,
    WORKFLOW, WORKFLOW_RESULT, PendingItem, SessionStatus, Update,
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


class HitlClient:
    """Sessions on one task queue of one Temporal namespace."""

    def __init__(self, client: Client, task_queue: str | None = None) -> None:
        self.temporal = client
        self.task_queue = task_queue or os.environ.get("HITL_TASK_QUEUE") or DEFAULT_TASK_QUEUE

    @classmethod
    async def connect(cls) -> HitlClient:
        """Connected as `starter.py` connects: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE (or Temporal's
        envconfig profile), HITL_TASK_QUEUE, and the payload codec of HITL_ENCRYPTION_KEY."""
        settings = Settings.from_env()
        return cls(await connect(settings), settings.task_queue)

    async def start(self, message: str, session_id: str | None = None, by: str | None = None,
                    **session_input: Any) -> Session:
        """Start a session (the workflow input's other fields as keywords: tools, max_steps, agents, ...)."""
        request: dict[str, Any] = {"message": message, **session_input}
        if by is not None:
            request["by"] = by
        session_id = session_id or f"session-{uuid.uuid4().hex[:12]}"
        summary, details = session_summary(request, session_id, started_with="HitlClient.start", encrypted=ENCRYPTED)
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
        return [PendingItem.model_validate(item) for item in await self._query(PENDING.name)]

    async def status(self) -> SessionStatus:
        return SessionStatus.model_validate(await self._query(STATUS.name))

    async def transcript(self) -> list[dict[str, Any]]:
        """The conversation as OpenAI chat messages, across every run (as the `transcript` query)."""
        return await read_all(self.client.temporal, self.id, TRANSCRIPT_PAGE.name, "messages")

    async def audit(self) -> list[dict[str, Any]]:
        """Every request and decision, across every run (as the `audit` query)."""
        return await read_all(self.client.temporal, self.id, AUDIT_PAGE.name, "events")

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
                      comment: str | None = None) -> Decision:
        """Run the pending call; `args` replaces the model's arguments (checked against the tool's schema)."""
        return await self._send(APPROVE.update, {"call_id": call_id, "by": by, "args": args, "comment": comment, "via": VIA})

    async def reject(self, call_id: str | None = None, *, reason: str | None = None, by: str | None = None) -> Decision:
        return await self._send(REJECT.update, {"call_id": call_id, "by": by, "reason": reason, "via": VIA})

    async def answer(self, answer: Any, call_id: str | None = None, *, by: str | None = None) -> Decision:
        return await self._send(ANSWER.update, {"call_id": call_id, "by": by, "answer": answer, "via": VIA})

    async def message(self, text: str, *, by: str | None = None) -> Decision:
        return await self._send(USER_MESSAGE.update, {"text": text, "by": by})

    async def cancel(self, reason: str | None = None) -> Decision:
        return await self._send(CANCEL.update, {"reason": reason})

    # ------------------------------------------------------------ the wire

    async def _send(self, update: Update[Any, Any], body: dict[str, Any]) -> Decision:
        payload = {key: value for key, value in body.items() if value is not None}
        if update is ANSWER.update:
            payload.setdefault("answer", body["answer"])  # None is an answer too, and the session judges it
        try:
            return Decision.model_validate(await execute_update_retrying(self.handle, update, payload))
        except WorkflowUpdateFailedError as error:
            raise Refused.of(error) from None

    async def _query(self, name: str) -> Any:
        return await query_now(self.client.temporal, self.id, name)

    async def _last_event(self) -> int:
        answer = await read_events(self.client.temporal, self.id, 0, 1)
        return int((answer or {}).get("last") or 0)

    async def _settled(self) -> SessionStatus:
        while True:
            # The last event before the status is read: a session running now settles after it.
            before = await self._last_event()
            try:
                status = await self.status()
            except (RPCError, WorkflowQueryFailedError):
                status = None  # not answerable yet (its first task): the Update waits for the first settle
            if status is not None and status.state != "running" and status.queued_messages == 0:
                return status
            try:
                answer = await execute_update_retrying(self.handle, WAIT_UNTIL_SETTLED, {"after_event": before})
            except WorkflowUpdateFailedError as error:
                raise Refused.of(error) from None
            status = SessionStatus.model_validate(answer["status"])
            if status.state != "running":  # `running`: it handed over to a new run; ask again
                return status
