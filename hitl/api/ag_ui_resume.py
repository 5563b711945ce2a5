"""An AG-UI run's `resume` entries as decisions on the pauses its previous run ended with.

Each entry names an interrupt (a pause's call id) and carries what the pause's
`responseSchema` allows. A pause bound to a tool call takes AG-UI's recommended
`{"approved": true | false, "editedArgs"?: {...}}`: `editedArgs` replaces the
call's arguments in full (a review's `editedResult` its result), `reason` says
why with `approved: false`, `comment` goes with `approved: true`. The API's own
older shape, `{"decision": "approve" | "reject" | "answer", ...}` with the
fields of its approve, reject and answer bodies, is still read (a question is
answered in it). An entry with status `cancelled` rejects the call, so an
abandoned approval never runs. Every entry is checked first (its access, as
`allowed_on_call` grants it, and its shape), and only then are they decided,
each through `decide()`: an entry for an unknown or settled call decides
nothing at all. An entry whose call this person already decided the same way
is acknowledged again, not decided twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ag_ui.core import CustomEvent, ResumeEntry
from fastapi import HTTPException, Request
from pydantic import ValidationError
from temporalio.service import RPCError, RPCStatusCode

from hitl.api.calls import DOOR_VERBS, Verb, decide, decision_fields
from hitl.api.gateway import temporal
from hitl.api.guard import Grant, allowed_on_call
from hitl.api.ag_ui_events import DECISIONS
from hitl.client.sessions import read_all
from workflows.contract import AUDIT_PAGE
from workflows.forms import check_answer, describe_validation_error

# The audit's record of each decision (workflows/recorder.py, AUDIT_EVENT).
RECORDED_AS = {"approve": ("approved", "edited"), "reject": ("rejected",), "answer": ("answered",)}
ARTICLE = {"approval": "an"}
ABANDONED = "abandoned through AG-UI (resume status cancelled)"


@dataclass(frozen=True)
class Resolution:
    """What one resume entry asks: this verb, with these fields, on this call."""

    call_id: str
    verb: Verb
    fields: dict[str, Any]


# AG-UI's words in an `approved` payload, as the API's approve and reject bodies name them.
WITH_APPROVED = {"editedArgs": "args", "editedResult": "result", "comment": "comment"}
WITH_DENIED = {"reason": "reason"}
WITH_EITHER = {"expectedArgsSha256": "expected_args_sha256"}  # refused (409-like) once the arguments changed
EITHER_SHAPE = ('the payload must be {"approved": true | false, "editedArgs"?: {...}} or, in the older shape, '
                'an object with "decision": "approve", "reject" or "answer" (the interrupt\'s responseSchema)')


def resolution_of(entry: ResumeEntry) -> Resolution:
    """The entry as a decision, or 422 saying what its payload lacks."""
    call_id = entry.interrupt_id
    if entry.status == "cancelled":
        return Resolution(call_id, "reject", {"reason": ABANDONED})
    payload = entry.payload
    try:
        if isinstance(payload, dict) and "approved" in payload:
            verb, rest = approved_or_denied(payload)
        elif isinstance(payload, dict) and payload.get("decision") in DOOR_VERBS:
            verb, rest = payload["decision"], {key: value for key, value in payload.items() if key != "decision"}
        else:
            raise ValueError(EITHER_SHAPE)
        return Resolution(call_id, verb, decision_fields(verb, rest))
    except ValidationError as error:  # a ValueError too: said in one line first
        raise HTTPException(422, f"resume {call_id}: {describe_validation_error(error)}") from None
    except ValueError as problem:
        raise HTTPException(422, f"resume {call_id}: {problem}") from None


def approved_or_denied(payload: dict[str, Any]) -> tuple[Verb, dict[str, Any]]:
    """AG-UI's `{"approved": ...}` payload as the API's verb and body; ValueError says what is wrong."""
    approved = payload["approved"]
    if not isinstance(approved, bool):
        raise ValueError(f"approved must be true or false, not {json.dumps(approved)[:40]}")
    if "decision" in payload:
        raise ValueError('a payload has one shape: "approved" (AG-UI\'s) or "decision" (the older), not both')
    words, other = ({**WITH_APPROVED, **WITH_EITHER}, WITH_DENIED) if approved else ({**WITH_DENIED, **WITH_EITHER}, WITH_APPROVED)
    body: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "approved":
            continue
        if key in other:
            raise ValueError(f"{key} goes only with approved: {json.dumps(not approved)}, "
                             f"not with approved: {json.dumps(approved)}")
        if key not in words:
            raise ValueError(f"unknown field {key[:40]!r}: beside approved, a payload may carry "
                             f"{', '.join([*WITH_APPROVED, *WITH_DENIED, *WITH_EITHER])}")
        body[words[key]] = value
    if "editedArgs" in payload and not isinstance(payload["editedArgs"], dict):
        raise ValueError("editedArgs must be an object: the call's arguments in full, which replace them")
    if "editedResult" in payload and not isinstance(payload["editedResult"], str):
        raise ValueError("editedResult must be text: the result the model sees instead")
    return ("approve" if approved else "reject"), body


async def decide_resumed(request: Request, session_id: str, person: str, entries: list[ResumeEntry]) -> list[CustomEvent]:
    """Decide every entry, each as the caller; a `hitl.resume` event per entry says what came of it."""
    plans = [resolution_of(entry) for entry in entries]
    named = [plan.call_id for plan in plans]
    if len(set(named)) < len(named):
        raise HTTPException(422, "resume names one interrupt twice: which entry counts is ambiguous")
    checked: list[tuple[Resolution, Grant | None]] = []
    for plan in plans:
        try:
            grant = await allowed_on_call(plan.verb)(request, session_id, plan.call_id, person)
        except HTTPException as refusal:
            if refusal.status_code in (404, 409) and await decided_already(request, session_id, plan, person):
                checked.append((plan, None))
                continue
            raise HTTPException(refusal.status_code, f"resume {plan.call_id}: {refusal.detail}") from None
        fits(plan, grant.item or {})
        checked.append((plan, grant))
    notes = []
    for plan, grant in checked:
        outcome: dict[str, Any] = {"already_decided": True}
        if grant is not None:
            try:
                outcome = await decide(request, session_id, plan.call_id, plan.verb, grant, plan.fields, via="ag-ui")
            except HTTPException as refusal:
                if refusal.status_code != 409 or not await decided_already(request, session_id, plan, person):
                    raise HTTPException(refusal.status_code, f"resume {plan.call_id}: {refusal.detail}") from None
        notes.append(CustomEvent(name="hitl.resume", value={
            "interruptId": plan.call_id, "decision": plan.verb, "by": person,
            **{key: value for key, value in outcome.items() if key in ("outcome", "already_decided", "approvals")},
        }))
    return notes


def fits(plan: Resolution, item: dict[str, Any]) -> None:
    """The decision suits the pause (checked before anything is decided): the session would refuse
    it, but only after the entries before it were decided."""
    kind = str(item.get("kind") or "approval")
    allowed = DECISIONS.get(kind, [])
    if plan.verb not in allowed:
        raise HTTPException(422, f"resume {plan.call_id}: {ARTICLE.get(kind, 'a')} {kind} is decided with "
                                 f"{' or '.join(allowed)}, not {plan.verb}")
    if kind == "review" and "args" in plan.fields:
        raise HTTPException(422, f"resume {plan.call_id}: a review's call has run: its result may be replaced "
                                 "(editedResult), not its args")
    if kind == "approval" and "result" in plan.fields:
        raise HTTPException(422, f"resume {plan.call_id}: an approval's call has not run: its args may be replaced "
                                 "(editedArgs), it has no result yet")
    if plan.verb == "answer":
        try:
            check_answer(plan.fields["answer"], item.get("choices"), item.get("fields"))
        except ValueError as problem:
            raise HTTPException(422, f"resume {plan.call_id}: {problem}") from None


async def decided_already(request: Request, session_id: str, plan: Resolution, person: str) -> bool:
    """Whether the audit shows this person deciding this call this way (the entry was sent before).
    It names only the person's own decision, so it tells them nothing they did not do. A sub-agent's
    call, which its root lists as `<child session>/<call>`, is recorded in the child's audit."""
    child, _, child_call = plan.call_id.rpartition("/")
    audited, call_id = (child, child_call) if child.startswith(f"{session_id}/") else (session_id, plan.call_id)
    try:
        trail = await read_all(await temporal(request).get(), audited, AUDIT_PAGE.name, "events")
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:  # no such child: nothing of it was decided
            return False
        raise
    return any(event.get("call_id") == call_id and event.get("by") == person
               and event.get("event") in RECORDED_AS[plan.verb] for event in trail)
