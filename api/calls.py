"""Decisions on one pending call: approve, reject, answer, claim, release.

Each goes through the workflow's validated Update with `by` set to the token's
person and a `proof` the API signs for that person (workflows/proofs.py), bound
to the session, the call, the verb and the arguments it is about. A session
started with verified decisions counts nothing else, so a `by` typed into the
`temporal` CLI is refused there while the same person through this API counts.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from api.auth import caller
from api.gateway import first_run_of, now, run_query, send_update, temporal
from console.sessions import read_all
from workflows.pauses import Refusal, parse_decision
from workflows.proofs import ProofAction, sign_decision
from workflows.rules import args_sha256

router = APIRouter(prefix="/sessions/{session_id}/calls/{call_id}", tags=["decisions"])

Verb = Literal["approve", "reject", "answer", "claim", "release"]
IGNORED_BY = Field(None, description="ignored: a decision is always the token's person's")


class ApproveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: dict[str, Any] | None = Field(None, description="edited arguments, checked against the tool's schema")
    result: Any = Field(None, description="for a review: the result the model sees instead")
    comment: str | None = None
    remember: dict[str, Any] | None = Field(None, description='{"scope": "tool" or "same_args", "for_seconds": N}')
    expected_args_sha256: str | None = Field(None, description="refused (409) when the call's arguments changed since")
    by: Any = IGNORED_BY


class RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = None
    expected_args_sha256: str | None = None
    by: Any = IGNORED_BY


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: Any = Field(..., description="text, a choice, or an object for the question's fields")
    by: Any = IGNORED_BY


class ClaimBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    for_seconds: float | None = Field(None, description="default 900, at most 86400")
    by: Any = IGNORED_BY


async def pending_item(request: Request, session_id: str, call_id: str) -> dict[str, Any]:
    """The open pause for `call_id`: 404 for an unknown session or call, 409 for a settled one."""
    for item in await run_query(request, session_id, "pending"):
        if item["call_id"] == call_id:
            return item
    trail = await read_all(await temporal(request).get(), session_id, "audit_page", "events")  # across runs
    outcomes = [event["event"] for event in trail if event.get("call_id") == call_id and event["event"] != "refused"]
    if any(outcome != "requested" for outcome in outcomes):
        raise HTTPException(409, f"{call_id} is already settled ({outcomes[-1]})")
    raise HTTPException(404, f"no call {call_id!r} waits in session {session_id!r}")


def check_decider(item: dict[str, Any], verb: Verb, person: str) -> None:
    """403 before asking the session, for what the pending item already says (the session
    checks again: it is the authority)."""
    approvers = item.get("approvers")
    if item["kind"] != "question" and approvers is not None and person not in approvers:
        raise HTTPException(403, f"{person} may not decide {item['tool']}; approvers: {', '.join(approvers)}")
    if verb == "approve" and item.get("four_eyes") and person == item.get("requested_by"):
        raise HTTPException(403, f"four-eyes rule: {person} asked for this call and cannot approve it")


def proof_for(request: Request, session_id: str, call_id: str, verb: ProofAction, person: str, sha: str,
              decision_sha256: str, first_run_id: str) -> str:
    """A proof for `person`, bound to this session, call and verb, the arguments the person saw
    and the whole decision (workflows/proofs.py)."""
    key_id, key = request.app.state.signer()
    return sign_decision(key, key_id, session_id=session_id, call_id=call_id, action=verb, by=person,
                         args_sha256=sha, now=now(), decision_sha256=decision_sha256, first_run_id=first_run_id)


async def decide(request: Request, session_id: str, call_id: str, verb: Verb, person: str,
                 fields: dict[str, Any]) -> dict[str, Any]:
    item = await pending_item(request, session_id, call_id)
    if verb in ("approve", "reject"):
        check_decider(item, verb, person)
    edited = fields.get("args")
    sha = args_sha256(edited) if verb == "approve" and edited is not None else item["args_sha256"]
    payload = {**fields, "call_id": call_id, "by": person}
    try:
        digest = parse_decision(verb, payload).digest()
    except Refusal as refusal:
        raise HTTPException(422, str(refusal)) from None
    proof = proof_for(request, session_id, call_id, verb, person, sha, digest, await first_run_of(request, session_id))
    return await send_update(request, session_id, f"{verb}_update", {**payload, "proof": proof})


def given(body: BaseModel) -> dict[str, Any]:
    return body.model_dump(exclude_none=True, exclude={"by"})


@router.post("/approve")
async def approve(session_id: str, call_id: str, body: ApproveBody, request: Request,
                  person: str = Depends(caller)) -> dict[str, Any]:
    """Run the call (with `args` when edited), or pass a review (with `result` when edited)."""
    return await decide(request, session_id, call_id, "approve", person, given(body))


@router.post("/reject")
async def reject(session_id: str, call_id: str, body: RejectBody, request: Request,
                 person: str = Depends(caller)) -> dict[str, Any]:
    """Do not run it (or decline a question); the model reads the reason."""
    return await decide(request, session_id, call_id, "reject", person, given(body))


@router.post("/answer")
async def answer(session_id: str, call_id: str, body: AnswerBody, request: Request,
                 person: str = Depends(caller)) -> dict[str, Any]:
    """Answer a question: a choice, text, or an object for its fields."""
    return await decide(request, session_id, call_id, "answer", person, {"answer": body.answer})


@router.post("/claim")
async def claim(session_id: str, call_id: str, request: Request, body: ClaimBody | None = None,
                person: str = Depends(caller)) -> dict[str, Any]:
    """Take the call for a while: others' decisions on it are refused (409) until it is released
    or the claim expires."""
    return await decide(request, session_id, call_id, "claim", person, given(body) if body else {})


@router.post("/release")
async def release(session_id: str, call_id: str, request: Request, person: str = Depends(caller)) -> dict[str, Any]:
    """Give a claimed call back."""
    return await decide(request, session_id, call_id, "release", person, {})
