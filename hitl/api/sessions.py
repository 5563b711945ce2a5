"""Sessions: start one, read it (status, pending, transcript, audit), talk to it, cancel it.

`POST /sessions` starts the workflow and sends it the `wait_until_settled`
Update in one request (update-with-start), so the 201 carries the first pause
or the first answer: the caller needs no polling loop. It never starts one under
the id of a session that exists, running or closed (409): Temporal refuses it
(the id conflict and id reuse policies), so two requests cannot race past a check.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request
from starlette.convertors import PathConvertor, register_url_convertor
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from hitl.access import may_start
from hitl.api.auth import caller
from hitl.api.calls import proof_for
from hitl.api.gateway import Refused, now, run_query, send_signed, send_update, temporal
from hitl.api.guard import Grant, allowed, policy_as_written, refuse_unless, session_read
from hitl.api.owned_sessions import SessionsPerPerson
from hitl.client.consequences import with_consequences
from hitl.client.refusals import reason_of
from hitl.client.sessions import MissingItems, read_all
from hitl.client.summary import session_summary
from hitl.settings import ENCRYPTED
from workflows.contract import (
    AUDIT_PAGE, CANCEL, PENDING, STATUS, TRANSCRIPT_PAGE, USER_MESSAGE, WAIT_UNTIL_SETTLED, WORKFLOW, WORKFLOW_RESULT,
    PendingItem, SessionStatus,
)
from workflows.forms import describe_validation_error
from workflows.proofs import MESSAGE_CALL_ID
from workflows.rules import args_sha256
from workflows.identity import message_digest, start_proof
from workflows.session import AuditEvent, CancelRequest, SessionInput, UserMessage

router = APIRouter(prefix="/sessions", tags=["sessions"])


class SessionPath(PathConvertor):
    """`{session_id:session}`: a session's id, or a child session's with its slashes (`<root>/<agent>/<n>`,
    level by level, raw or URL-encoded: Starlette decodes %2F before routing). Pairs of segments
    only, so `/sessions/<id>/events` and the other routes under a session are never taken for an id."""

    regex = r"[^/]+(?:/[^/]+/[^/]+)*"


register_url_convertor("session", SessionPath())

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$")
SESSION_MEMO = "hitl_session"
SETTLE_ROUNDS = 50  # a session that hands over this often during one turn is answered as running
SETTLE_PAUSE_SECONDS = 0.05  # before asking again, doubling up to 1 s (about 45 s in all)


class Started(BaseModel):
    """`POST /sessions`' 201: the session's id, and its status and pending items once its first turn
    paused or answered (the items as the `pending` query answers them: unset fields left out)."""

    session_id: str
    status: SessionStatus
    pending: list[PendingItem]


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    interrupt: bool = False
    wait: bool = Field(False, description="answer once the turn has paused or answered, with status and pending")
    by: Any = Field(None, description="ignored: the message is from the token's person")


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = None


def session_input(body: dict[str, Any], person: str, policy: Any = None) -> tuple[str, dict[str, Any]]:
    """The workflow input from a POST body: `session_id` taken out, `by` set to the caller,
    verified decisions on unless the body turns them off, checked (against the operator's
    policy too) before anything starts."""
    request = dict(body)
    session_id = request.pop("session_id", None) or f"session-{uuid.uuid4().hex[:12]}"
    if not isinstance(session_id, str) or not SESSION_ID.match(session_id):
        raise HTTPException(422, "session_id: letters, digits and . _ : @ - only, at most 200, starting with a letter or digit")
    request["by"] = person
    request.setdefault("verified_decisions", True)
    try:
        checked = SessionInput.model_validate(request)
    except ValidationError as error:
        raise HTTPException(422, f"invalid session input: {describe_validation_error(error)}") from None
    problems = checked.rule_problems() + (policy.loosened_by(request) if policy is not None else [])
    if problems:
        raise HTTPException(422, f"invalid session input: {'; '.join(problems)}")
    return session_id, request


async def settle(request: Request, session_id: str, after_event: int, settled: dict[str, Any] | None = None) -> dict[str, Any]:
    """Once the session has stopped running after event `after_event`: `wait_until_settled`
    answers `running` when the session hands over to a new run, and is asked again."""
    for round_no in range(SETTLE_ROUNDS):
        if settled is not None and settled["status"]["state"] != "running":
            break
        if round_no:  # answered while handing over (which may wait a minute for a webhook): not at once again
            await asyncio.sleep(min(SETTLE_PAUSE_SECONDS * 2 ** (round_no - 1), 1.0))
        try:
            settled = await send_update(request, session_id, WAIT_UNTIL_SETTLED, {"after_event": after_event})
        except Refused as refusal:
            # What the caller sent was applied before this wait; a busy run is still running.
            if refusal.code != "busy":
                raise
    if settled is None:
        return {"status": await run_query(request, session_id, STATUS), "pending": await run_query(request, session_id, PENDING)}
    return settled


# exclude_unset: the pending items' unset fields stay out, as the query leaves them; status keeps its nulls.
@router.post("", status_code=201, response_model=Started, response_model_exclude_unset=True)
async def start_session(request: Request, body: dict[str, Any] = Body(...), person: str = Depends(caller)) -> Started:
    """Start a session (the workflow input as the body, `session_id` optional) and answer once its
    first turn has paused for a person or answered."""
    # As the worker will read it at start: no token's groups (the start's proof carries none).
    policy = policy_as_written(request)
    refuse_unless(may_start(person, policy))
    session_id, workflow_input = session_input(body, person, policy)
    if workflow_input["verified_decisions"]:
        # On one machine, the key file a worker trusts exists before the session. The start carries
        # the API's proof that the caller started it with this input: its first request is verified.
        key_id, key = request.app.state.signer()
        workflow_input["proof"] = start_proof(key, key_id, session_id, workflow_input, now())
    gateway = temporal(request)
    client = await gateway.get()
    summary, details = session_summary(workflow_input, session_id, started_with="the HTTP API", encrypted=ENCRYPTED)
    start = WithStartWorkflowOperation(  # type: ignore[call-overload]  # plain payloads, not str: see hitl/client/summary.py
        WORKFLOW, workflow_input, id=session_id, task_queue=await gateway.queue(), result_type=WORKFLOW_RESULT,
        # A closed session's id is not used again either: its owner keeps its history, and what was
        # issued for it (mail links, Slack buttons) could be taken for the new session's.
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        static_summary=summary, static_details=details,
        memo={SESSION_MEMO: session_memo(workflow_input)},
    )
    owned: SessionsPerPerson = request.app.state.sessions_per_person
    try:
        async with owned.start(client, await gateway.queue(), person, session_id):  # 429 past the person's limit
            settled = await client.execute_update_with_start_workflow(
                WAIT_UNTIL_SETTLED.name, {}, start_workflow_operation=start
            )
    except WorkflowAlreadyStartedError:
        raise HTTPException(409, f"session {session_id!r} already exists (running or closed): a session's id is "
                                 "never used again; choose another") from None
    except WorkflowUpdateFailedError as error:
        raise HTTPException(422, await why_it_ended(client, session_id) or reason_of(error)) from None
    except RPCError as error:
        raise HTTPException(503, f"could not start the session: {error.message}") from None
    settled = await settle(request, session_id, 0, settled)
    return Started.model_validate({"session_id": session_id, "status": settled["status"], "pending": settled["pending"]})


def session_memo(workflow_input: dict[str, Any]) -> dict[str, Any]:
    """The `hitl_session` memo the workflow keeps (owner, participants, verified), set at start
    too: the access table reads it with a describe, before the first workflow task has run."""
    return {"owner": workflow_input["by"], "participants": list(workflow_input.get("participants") or []),
            "verified": bool(workflow_input.get("verified_decisions"))}


async def why_it_ended(client: Client, session_id: str) -> str | None:
    """A session that ended before its first turn settled (the worker refused its input, e.g. rules
    that name unknown tools, or verified decisions without a trusted key): the reason it failed with."""
    try:
        await asyncio.wait_for(client.get_workflow_handle(session_id).result(), 10)
    except WorkflowFailureError as failure:
        return reason_of(failure)
    except (asyncio.TimeoutError, RPCError):
        return None
    return None


@router.get("/{session_id:session}", response_model=SessionStatus)
async def status(session_id: str, request: Request, grant: Grant = Depends(allowed("read"))) -> dict[str, Any]:
    """The `status` query."""
    return await session_read(request, grant, STATUS.name, lambda: run_query(request, session_id, STATUS))


# Without the unset fields, as the query answers (PendingCall.view): what goes over the wire is the query's.
@router.get("/{session_id:session}/pending", response_model=list[PendingItem], response_model_exclude_none=True)
async def pending(session_id: str, request: Request,
                  grant: Grant = Depends(allowed("read", calls_below=True))) -> list[dict[str, Any]]:
    """The `pending` query: what waits for a person, with the rules that govern each item, what
    approving it does and what its deadline does (hitl/client/consequences.py). A child's approver
    who may not read the session gets only the child's calls they may decide."""
    items = await session_read(request, grant, PENDING.name, lambda: run_query(request, session_id, PENDING))
    if grant.only_calls is not None:
        items = [item for item in items if item["call_id"] in grant.only_calls]
    return [with_consequences(item) for item in items]


@router.get("/{session_id:session}/transcript")
async def transcript(session_id: str, request: Request, grant: Grant = Depends(allowed("read"))) -> list[dict[str, Any]]:
    """The whole conversation as OpenAI chat messages, across every run of a long session."""
    client = await temporal(request).get()
    return await session_read(request, grant, TRANSCRIPT_PAGE.name,
                              lambda: read_all(client, session_id, TRANSCRIPT_PAGE.name, "messages"))


@router.get("/{session_id:session}/audit", response_model=list[AuditEvent | MissingItems], response_model_exclude_unset=True)
async def audit(session_id: str, request: Request, grant: Grant = Depends(allowed("read"))) -> list[dict[str, Any]]:
    """Every request, decision and refusal, across every run."""
    client = await temporal(request).get()
    return await session_read(request, grant, AUDIT_PAGE.name, lambda: read_all(client, session_id, AUDIT_PAGE.name, "events"))


@router.post("/{session_id}/messages")
async def send_message(session_id: str, body: Message, request: Request,
                       grant: Grant = Depends(allowed("message"))) -> dict[str, Any]:
    """A new user turn from the caller; `interrupt` stops the running step to re-plan with it.
    With `wait`, the answer also carries the status and pending items once the turn settles."""
    person = grant.person
    try:
        message = UserMessage(text=body.text, interrupt=body.interrupt, by=person)
    except ValidationError as error:
        raise HTTPException(422, f"malformed user_message: {describe_validation_error(error)}") from None
    accepted = await send_signed(
        request, session_id, USER_MESSAGE.update, message.model_dump(exclude={"proof"}),
        lambda run: proof_for(request, session_id, MESSAGE_CALL_ID, "message", person,
                              args_sha256({"text": body.text}), message_digest(message), run))
    if not body.wait:
        return accepted
    settled = await settle(request, session_id, accepted.get("event", 0))
    return {**accepted, "status": settled["status"], "pending": settled["pending"]}


@router.post("/{session_id}/cancel")
async def cancel(session_id: str, request: Request, body: CancelBody | None = None,
                 grant: Grant = Depends(allowed("cancel"))) -> dict[str, Any]:
    """Stop the session; every pending call is settled as cancelled."""
    person = grant.person
    given = body.reason if body else None
    reason = f"{given} (by {person})" if given else f"cancelled by {person}"
    try:  # checked here: a reason past Temporal's payload limits would never reach the session's own check
        cancelling = CancelRequest(reason=reason)
    except ValidationError as error:
        raise HTTPException(422, f"malformed cancel: {describe_validation_error(error)}") from None
    return await send_update(request, session_id, CANCEL.update, cancelling.model_dump())
