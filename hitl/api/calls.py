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

from hitl.api.gateway import Run, now, send_signed
from hitl.api.guard import Grant, allowed_on_call, policy_of
from workflows.contract import INBOUND
from workflows.decisions import CLAIM_SECONDS_AT_MOST, Refusal, parse_decision
from workflows.proofs import ProofAction, sign_decision
from workflows.rules import args_sha256

# A child session's call, as its root lists it, has an id with slashes (`<child id>/<call id>`).
router = APIRouter(prefix="/sessions/{session_id}/calls/{call_id:path}", tags=["decisions"])

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

    for_seconds: float | None = Field(None, gt=0, le=CLAIM_SECONDS_AT_MOST,
                                      description=f"default 900, at most {CLAIM_SECONDS_AT_MOST:g} (an hour)")
    by: Any = IGNORED_BY


def proof_for(request: Request, session_id: str, call_id: str, verb: ProofAction, person: str, sha: str,
              decision_sha256: str, run: Run, for_person: str | None = None) -> str:
    """A proof for `person`, bound to this run of the session and its chain of runs, this call and
    verb, the arguments the person saw and the whole decision (workflows/proofs.py); `for_person`:
    whom they decide for as their stand-in (hitl/api/delegations.py found the hand-over)."""
    key_id, key = request.app.state.signer()
    policy = policy_of(request)
    # The groups the caller's OpenID token vouched for reach the session only in their proof.
    groups = policy.groups_of(person) if policy is not None and getattr(policy, "groups_from_identity", False) else None
    return sign_decision(key, key_id, session_id=session_id, call_id=call_id, action=verb, by=person,
                         args_sha256=sha, now=now(), decision_sha256=decision_sha256, run_id=run.run_id,
                         chain=run.chain, groups=groups or None, for_=for_person)


async def decide(request: Request, session_id: str, call_id: str, verb: Verb, grant: Grant,
                 fields: dict[str, Any], via: str = "api", issued_in: str | None = None) -> dict[str, Any]:
    """The decision through the session's validated Update, once the access table allowed it
    (`allowed_on_call`: the session checks again, it is the authority). `via` names the door
    (the API, a channel, a protocol) in the audit; the proof binds it with the rest. A child's call
    listed by its root goes to the child, signed for the child: the grant names it (allowed_on_call).
    `issued_in`: the chain of runs of `session_id` a mail link or a Slack button was issued in; a
    session of another chain under that id is not signed for (grant_on_call checked it first)."""
    item, person = grant.item, grant.person
    assert item is not None  # allowed_on_call found it
    if grant.session.session_id != session_id:
        issued_in = None  # a child's call: its root's chain was checked where the grant was made
    session_id, call_id = grant.session.session_id, item["call_id"]
    edited = fields.get("args")
    sha = args_sha256(edited) if verb == "approve" and edited is not None else item["args_sha256"]
    payload = {**fields, "call_id": call_id, "by": person, "via": via}
    try:
        digest = parse_decision(verb, payload).digest()
    except Refusal as refusal:
        raise HTTPException(422, str(refusal)) from None
    return await send_signed(request, session_id, INBOUND[verb].update, payload, lambda run: proof_for(
        request, session_id, call_id, verb, person, sha, digest, run, grant.for_person), issued_in)


def given(body: BaseModel) -> dict[str, Any]:
    return body.model_dump(exclude_none=True, exclude={"by"})


DOOR_VERBS = ("approve", "reject", "answer")
BODIES: dict[str, type[BaseModel]] = {"approve": ApproveBody, "reject": RejectBody, "answer": AnswerBody}


def decision_fields(verb: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a door other than these routes (AG-UI's resume, an A2A data part) sends for `verb`,
    checked as the route's body is; ValidationError names what is wrong."""
    checked = BODIES[verb].model_validate(body)
    return {"answer": body["answer"]} if verb == "answer" else given(checked)


@router.post("/approve")
async def approve(session_id: str, call_id: str, body: ApproveBody, request: Request,
                  grant: Grant = Depends(allowed_on_call("approve"))) -> dict[str, Any]:
    """Run the call (with `args` when edited), or pass a review (with `result` when edited)."""
    return await decide(request, session_id, call_id, "approve", grant, given(body))


@router.post("/reject")
async def reject(session_id: str, call_id: str, body: RejectBody, request: Request,
                 grant: Grant = Depends(allowed_on_call("reject"))) -> dict[str, Any]:
    """Do not run it (or decline a question); the model reads the reason."""
    return await decide(request, session_id, call_id, "reject", grant, given(body))


@router.post("/answer")
async def answer(session_id: str, call_id: str, body: AnswerBody, request: Request,
                 grant: Grant = Depends(allowed_on_call("answer"))) -> dict[str, Any]:
    """Answer a question: a choice, text, or an object for its fields."""
    return await decide(request, session_id, call_id, "answer", grant, {"answer": body.answer})


@router.post("/claim")
async def claim(session_id: str, call_id: str, request: Request, body: ClaimBody | None = None,
                grant: Grant = Depends(allowed_on_call("claim"))) -> dict[str, Any]:
    """Take the call for a while (at most an hour): others' decisions on it are refused (409) until
    it is released or the claim expires; it stays in their inbox, marked as claimed."""
    return await decide(request, session_id, call_id, "claim", grant, given(body) if body else {})


@router.post("/release")
async def release(session_id: str, call_id: str, request: Request, grant: Grant = Depends(allowed_on_call("release"))) -> dict[str, Any]:
    """Give a claimed call back."""
    return await decide(request, session_id, call_id, "release", grant, {})
