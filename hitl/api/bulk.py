"""`POST /decisions`: many calls decided in one request, each still its own decision.

Every row goes the way one decision through `/sessions/{id}/calls/{call}/approve`
(or `/reject`) goes: the access table for the token's person (`grant_on_call`),
then `calls.decide`, which signs a proof for that person, that call and those
arguments and sends the session's validated Update. The row's `args_sha256` (the
digest the person's table showed) travels as `expected_args_sha256`, so a call
whose arguments changed since is refused by the session itself. One row's
refusal is that row's answer; the others go on.

With `all_or_nothing`, every row is first checked without deciding anything:
the access table, then the session's own rule book (workflows/pauses.py's
`Pauses.decide`, the function the Update's validator runs) on the call as the
session's `pending` query gives it now. One refusal there and nothing is
decided. What that check cannot promise: a decision of someone else's (or a
session that closes) between the check and the decision still refuses that row
then, after others were decided (docs/interface.md, "Decisions at scale").

A request holds one of the person's reads (hitl/api/reading.py) while it runs,
and decides at most CONCURRENT_ROWS rows at a time.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hitl.api.auth import caller
from hitl.catalog import CATALOG
from hitl.api.calls import decide
from hitl.api.gateway import Refused, temporal_trouble
from hitl.api.guard import Grant, grant_on_call, policy_of
from workflows.decisions import Approve, Refusal, Reject, parse_decision
from workflows.limits import Name
from workflows.pauses import PendingCall, Pauses

router = APIRouter(tags=["decisions"])

MAX_ROWS = 1000  # decisions in one request
CONCURRENT_ROWS = 8  # decided at once, per request
STATUS_CODE = {403: "forbidden", 404: "not_found", 409: "conflict", 410: "gone", 422: "invalid", 429: "busy",
               503: "unavailable"}
NOT_ATTEMPTED = "all_or_nothing"


class BulkRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(..., min_length=1, max_length=400)
    call_id: str = Field(..., min_length=1, max_length=400)
    args_sha256: Name = Field(..., description="the arguments' digest the table showed: refused when it changed since")
    decision: Literal["approve", "reject"]
    reason: str | None = Field(None, max_length=4000, description="for a rejection: what the model reads")


class BulkBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[BulkRow] = Field(..., min_length=1, max_length=MAX_ROWS)
    all_or_nothing: bool = False


class RowOutcome(BaseModel):
    session_id: str
    call_id: str
    outcome: Literal["decided", "refused"]
    code: str | None = None
    reason: str | None = None


@router.post("/decisions", response_model=list[RowOutcome], response_model_exclude_none=True)
async def decide_many(body: BulkBody, request: Request, person: str = Depends(caller)) -> list[RowOutcome]:
    """Approve or reject many calls at once, each as its own decision (access, policy, proof, audit),
    only if its arguments still have the digest given; one answer per row, in the order given."""
    refuse_repeated_calls(body.decisions)
    async with request.app.state.reads.slot(person):
        if body.all_or_nothing:
            checked = await each_row(body.decisions, lambda row: checked_row(request, person, row))
            if any(answer.outcome == "refused" for answer in checked):
                return [answer if answer.outcome == "refused" else not_attempted(answer) for answer in checked]
        return await each_row(body.decisions, lambda row: decided_row(request, person, row))


def refuse_repeated_calls(rows: list[BulkRow]) -> None:
    seen: set[tuple[str, str]] = set()
    for row in rows:
        if (row.session_id, row.call_id) in seen:
            raise HTTPException(422, f"decisions: {row.session_id} {row.call_id} is named twice; name each call once")
        seen.add((row.session_id, row.call_id))


async def each_row(rows: list[BulkRow], work: Callable[[BulkRow], Awaitable[RowOutcome]]) -> list[RowOutcome]:
    """`work` on every row, CONCURRENT_ROWS at a time; answers in the rows' order."""
    gate = asyncio.Semaphore(CONCURRENT_ROWS)

    async def one(row: BulkRow) -> RowOutcome:
        async with gate:
            try:
                return await work(row)
            except HTTPException as error:
                return refused(row, code_of(error), str(error.detail))
            except Exception as error:  # noqa: BLE001 - one row's trouble must not lose the others' answers
                return refused(row, "error", unexpected(error))
    return list(await asyncio.gather(*(one(row) for row in rows)))


async def decided_row(request: Request, person: str, row: BulkRow) -> RowOutcome:
    """The row as one API decision: the access table, then the session's validated Update."""
    grant = await grant_on_call(request, row.session_id, row.call_id, person, row.decision)
    await decide(request, row.session_id, row.call_id, row.decision, grant, fields_of(row))
    return RowOutcome(session_id=row.session_id, call_id=row.call_id, outcome="decided")


async def checked_row(request: Request, person: str, row: BulkRow) -> RowOutcome:
    """The row checked without deciding: the access table, then the session's rule book on the call
    as it waits now, with the decision `decide` would send (`outcome` "decided": it would be)."""
    grant = await grant_on_call(request, row.session_id, row.call_id, person, row.decision)
    problem = rule_book_refusal(grant, row, groups_vouched(request, person))
    if problem is not None:
        return refused(row, problem.code, str(problem))
    return RowOutcome(session_id=row.session_id, call_id=row.call_id, outcome="decided")


def rule_book_refusal(grant: Grant, row: BulkRow, groups: tuple[str, ...]) -> Refusal | None:
    """What the session's Update validator would refuse the row for, asked of the same function
    (Pauses.decide) on the call as its `pending` query gave it; None when it would be taken."""
    assert grant.item is not None  # grant_on_call found the call
    payload = {**fields_of(row), "call_id": grant.item["call_id"], "by": grant.person, "via": "api"}
    try:
        call = PendingCall.model_validate(grant.item)
        decision = parse_decision(row.decision, payload)
        assert isinstance(decision, (Approve, Reject))  # the verbs a row may name
        Pauses(open=[call]).decide(decision, CATALOG, datetime.now(timezone.utc), groups=groups)
    except Refusal as refusal:
        return refusal
    except ValidationError as error:
        return Refusal(f"the session's pending call could not be read: {error.error_count()} problems", code="invalid")
    return None


def groups_vouched(request: Request, person: str) -> tuple[str, ...]:
    """The groups a proof signed for `person` would vouch for (hitl/api/calls.py, proof_for)."""
    policy = policy_of(request)
    if policy is None or not getattr(policy, "groups_from_identity", False):
        return ()
    return tuple(policy.groups_of(person))


def fields_of(row: BulkRow) -> dict[str, Any]:
    fields: dict[str, Any] = {"expected_args_sha256": row.args_sha256}
    if row.decision == "reject" and row.reason:
        fields["reason"] = row.reason
    return fields


def unexpected(error: Exception) -> str:
    """A row's failure that is not a refusal (Temporal did not answer, or a bug, logged)."""
    if (trouble := temporal_trouble(error)) is not None:
        return f"{trouble}; this call may or may not be decided: read it again"
    logging.getLogger("hitl.api").error("unexpected error in a bulk decision", exc_info=error)
    return "internal error; this call may or may not be decided: read it again"


def code_of(error: HTTPException) -> str:
    if isinstance(error, Refused) and error.code:
        return error.code
    return STATUS_CODE.get(error.status_code, "refused")


def refused(row: BulkRow, code: str | None, reason: str) -> RowOutcome:
    return RowOutcome(session_id=row.session_id, call_id=row.call_id, outcome="refused", code=code, reason=reason)


def not_attempted(checked: RowOutcome) -> RowOutcome:
    return checked.model_copy(update={"outcome": "refused", "code": NOT_ATTEMPTED,
                                      "reason": "not decided: another decision in this request would be refused "
                                                "(all_or_nothing)"})
