"""What every route shares: the Temporal client, queries, Updates, and refusals as HTTP statuses.

The workflow is the one rule book (workflows/pauses.py): the API asks it through
validated Updates and passes its reason on, with the status its refusal code names.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from fastapi import HTTPException, Request
from temporalio.client import (
    Client, WorkflowExecutionDescription, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from hitl.client.queries import query_now
from hitl.client.refusals import code_of, reason_of
from hitl.client.updates import execute_update_retrying, was_not_applied
from hitl.settings import Settings, connect
from workflows.contract import Query, Update

CODE_STATUS = {"not_found": 404, "forbidden": 403, "conflict": 409, "invalid": 422, "stale_run": 409, "busy": 503}


class Refused(HTTPException):
    """A session's refusal as an HTTP error, with the refusal's code (workflows/pauses.py)."""

    def __init__(self, code: str | None, reason: str) -> None:
        super().__init__(CODE_STATUS.get(code or "", 409), reason)
        self.code = code


def status_of(error: WorkflowUpdateFailedError) -> int:
    """The status for a session's refusal, from its code; 409 (refused in its current state) without one."""
    return CODE_STATUS.get(code_of(error) or "", 409)


@dataclass
class Temporal:
    """The API's connection, made on first use so `starter.py serve` starts without Temporal
    (the codec endpoint needs none)."""

    client: Client | None = None
    task_queue: str | None = None
    _lock: asyncio.Lock | None = None

    async def get(self) -> Client:
        if self.client is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self.client is None:
                    settings = Settings.from_env()
                    self.task_queue = self.task_queue or settings.task_queue
                    try:
                        self.client = await connect(settings)
                    except RuntimeError as error:
                        raise HTTPException(503, f"cannot reach Temporal at {settings.address}: {error}") from None
        return self.client

    async def queue(self) -> str:
        await self.get()
        return self.task_queue or Settings.from_env().task_queue


def temporal(request: Request) -> Temporal:
    return request.app.state.temporal


async def handle_of(request: Request, session_id: str) -> WorkflowHandle[Any, Any]:
    return (await temporal(request).get()).get_workflow_handle(session_id)


@dataclass(frozen=True)
class Run:
    """A session's current run, and its chain of runs: the id of the chain's first run, which a
    hand-over (continue-as-new) and a reset keep, and a session started again under the same id
    does not."""

    run_id: str
    chain: str


def chain_of(description: WorkflowExecutionDescription) -> str:
    """The chain of runs a described run belongs to (its own id on a server that does not say)."""
    return description.raw_description.workflow_execution_info.first_run_id or description.run_id or ""


def refuse_other_chain(session_id: str, issued_in: str | None, chain: str) -> None:
    """410 for what was issued in another chain of runs under this id (a mail link, a Slack button of
    an earlier session, since ended); nothing when `issued_in` is None (a door that names no chain)."""
    if issued_in is not None and issued_in != chain:
        raise HTTPException(410, f"this was issued for an earlier session under the id {session_id!r}, which has "
                                 "ended: it decides nothing in the session now under that id")


async def run_of(request: Request, session_id: str) -> Run:
    """The session's current run and chain, which every proof names: a reset is another run, a
    session started again under the same id another chain (workflows/identity.py, RunCheck)."""
    handle = await handle_of(request, session_id)
    try:
        described = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, f"unknown session {session_id!r}") from None
        raise
    return Run(described.run_id or "", chain_of(described))


async def send_signed(request: Request, session_id: str, update: Update[Any, Any], payload: dict[str, Any],
                      sign: Callable[[Run], str], issued_in: str | None = None) -> Any:
    """An Update whose proof names the session's current run and chain; signed again, for the new
    run, when the session handed over (continue-as-new) between the signature and its arrival.
    With `issued_in` (the chain a mail link or a Slack button was issued in), nothing is signed
    for a session of another chain (410)."""
    for attempt in range(3):
        run = await run_of(request, session_id)
        refuse_other_chain(session_id, issued_in, run.chain)
        try:
            return await send_update(request, session_id, update, {**payload, "proof": sign(run)})
        except Refused as refused:
            if refused.code != "stale_run" or attempt == 2:
                raise
    raise AssertionError("unreachable")


async def run_query(request: Request, session_id: str, query: Query[Any, Any], arg: Any = None) -> Any:
    """A query of the session; 404 when there is no such session. Retried briefly while a
    run hands over to the next (the new run's first task is not scheduled yet)."""
    client = await temporal(request).get()
    for attempt in range(20):
        try:
            return await query_now(client, session_id, query.name, arg)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise HTTPException(404, f"unknown session {session_id!r}") from None
            if "not scheduled yet" in error.message and attempt < 19:
                await asyncio.sleep(0.25)
                continue
            raise HTTPException(503, f"the session did not answer: {error.message}") from None
        except WorkflowQueryFailedError as error:
            raise HTTPException(500, f"the session could not answer {query.name}: {error.message}") from None
    raise AssertionError("unreachable")


async def send_update(request: Request, session_id: str, update: Update[Any, Any], payload: dict[str, Any]) -> Any:
    """A validated Update; a refusal becomes 403/404/409/422 with the workflow's reason."""
    handle = await handle_of(request, session_id)
    try:
        accepted = await execute_update_retrying(handle, update, payload)
    except WorkflowUpdateFailedError as error:
        raise Refused(code_of(error), reason_of(error)) from None
    except RPCError as error:
        if was_not_applied(error):  # still so after retries: the session is alive but cannot take it
            raise HTTPException(503, "the session could not take this request, and nothing of it was applied "
                                     f"(its workflow task failed, e.g. over Temporal's payload limits): {error.message}") from None
        if "completed" in error.message or error.status == RPCStatusCode.FAILED_PRECONDITION:
            raise HTTPException(409, f"the session is closed: {error.message}") from None
        if error.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, f"unknown session {session_id!r}") from None
        raise HTTPException(503, f"the session did not answer: {error.message}") from None
    request.app.state.feeds.nudge(session_id)  # its event streams show what follows at once
    return accepted


def temporal_trouble(error: BaseException) -> str | None:
    """What a failure of Temporal's (an RPC it did not answer, a client that never connected)
    says to the caller, answered 503; None for any other error, which is a bug."""
    if isinstance(error, RPCError):
        return f"Temporal did not answer: {error.message}"
    if isinstance(error, RuntimeError) and "client connect" in str(error):
        return f"cannot reach Temporal: {error}"
    return None


def now() -> datetime:
    return datetime.now(timezone.utc)


def ticket_secret(private_seed: bytes) -> bytes:
    """Stream tickets are keyed from the signing key, so every API replica that shares the key
    accepts the tickets of the others."""
    return hashlib.sha256(b"hitl stream ticket\0" + private_seed).digest()
