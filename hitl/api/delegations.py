"""`/people/me/delegations`: hand one's decisions to a stand-in while away, list and end hand-overs.

A hand-over (workflows/stand_ins.py) lives in the book of stand-ins, one workflow per task queue
(workflows/stand_in_book.py), so every API process and the worker read the same book and it
survives restarts. This API seals each hand-over with its signing key and believes only what it
sealed: anyone who reaches Temporal may write to the book, and the book is what the API reads
before it signs a decision "for" someone.

Who may: the verified person, for themself only, where the operator's policy says `"delegation":
true` (for every tool, or per tool). Deciding as a stand-in: `stand_in_grant`, which every door's
decision (hitl/api/guard.py, grant_on_call) asks when the person may not decide the call themself;
a claim and its release are granted by the same rule, as the access table grants them to whoever
decides the call.
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from hitl.access import Action, SessionFacts, verdict, waits_for_person
from hitl.api.auth import caller
from hitl.api.gateway import temporal
from hitl.api.guard import Grant, is_below, pending_item, policy_of, session_facts
from hitl.catalog import CATALOG
from workflows.deciders import CallRules, consenting
from workflows.limits import Name
from workflows.policy import OperatorPolicy
from workflows.proofs import public_key_b64
from workflows.stand_in_book import StandInBook, book_id
from workflows.stand_ins import StandIn, delegators_of, refusal_to_stand_in

router = APIRouter(prefix="/people/me/delegations", tags=["people"])
STAND_IN_VERBS = ("approve", "reject", "answer", "claim", "release")


class HandOverBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: Name = Field(..., description="the person who decides for you meanwhile")
    until: AwareDatetime = Field(..., description="when it ends (ISO 8601 with a time zone), at most 30 days ahead")
    tools: list[Name] | None = Field(None, min_length=1, max_length=50, description="tool names or globs; all when left out")


def now() -> datetime:
    return datetime.now(timezone.utc)


def operator_policy(request: Request) -> OperatorPolicy | None:
    policy = policy_of(request)
    return policy if isinstance(policy, OperatorPolicy) else None


def allows_hand_overs(policy: OperatorPolicy | None) -> bool:
    """Whether the policy lets anyone hand over anything (globally or for some tool)."""
    return policy is not None and (policy.delegation or any(rule.delegation for rule in policy.tools.values()))


def refusal_of_tools(policy: OperatorPolicy, tools: list[str] | None) -> str | None:
    """Why the policy does not let these tools be handed over; None when it does."""
    if tools is None:
        return None if policy.delegation else "the operator's policy allows hand-overs only of some tools: name them (tools)"
    known = sorted(set(CATALOG.names()) | {key for key in policy.tools if not any(c in key for c in "*?[")})
    for entry in tools:
        matched = [name for name in known if fnmatchcase(name, entry)] or ([entry] if entry in policy.tools else [])
        if not matched:
            return f"tools: {entry!r} names no tool this API knows"
        barred = [name for name in matched if not policy.allows_delegation(name)]
        if barred:
            return f"the operator's policy does not let decisions on {', '.join(barred)} be handed over (delegation)"
    return None


def seal(request: Request, stand_in: StandIn) -> str:
    key_id, key = request.app.state.signer()
    signature = base64.urlsafe_b64encode(key.sign(stand_in.sealed_body())).decode()
    return f"{key_id}.{signature}"


def sealed_here(request: Request, stand_in: StandIn) -> bool:
    """Whether this API's key sealed the hand-over as it reads now."""
    own_id, key = request.app.state.signer()
    return stand_in.sealed_by({own_id: public_key_b64(key)})


async def book(request: Request) -> list[StandIn]:
    """Every hand-over this API sealed, live or not (none before the first one is given)."""
    gateway = temporal(request)
    client = await gateway.get()
    handle = client.get_workflow_handle(book_id(await gateway.queue()))
    try:
        listed = await handle.query(StandInBook.listed)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return []
        raise HTTPException(503, f"the book of stand-ins did not answer: {error.message}") from None
    stand_ins = []
    for entry in listed:
        try:
            stand_in = StandIn.model_validate(entry)
        except ValueError:
            continue
        if sealed_here(request, stand_in):
            stand_ins.append(stand_in)
    return stand_ins


def shown(stand_in: StandIn, at: datetime) -> dict[str, Any]:
    return {**stand_in.model_dump(mode="json", exclude={"seal"}), "live": stand_in.live(at)}


@router.post("", status_code=201)
async def hand_over(body: HandOverBody, request: Request, person: str = Depends(caller)) -> dict[str, Any]:
    """Let `to` decide for you, on `tools` (or all you may decide), until `until`."""
    policy = operator_policy(request)
    if not allows_hand_overs(policy):
        raise HTTPException(403, "the operator's policy allows no hand-overs (delegation)")
    assert policy is not None
    if not policy.knows(body.to):
        raise HTTPException(422, f"to: the operator's policy knows no person {body.to!r}")
    refusal = refusal_of_tools(policy, body.tools)
    if refusal is not None:
        raise HTTPException(403 if "does not let" in refusal or "only of some" in refusal else 422, refusal)
    stand_in = StandIn(id=f"so-{uuid.uuid4().hex[:16]}", from_=person, to=body.to, tools=body.tools,
                       since=now(), until=body.until)
    stand_in.seal = seal(request, stand_in)
    gateway = temporal(request)
    client = await gateway.get()
    queue = await gateway.queue()
    start = WithStartWorkflowOperation(StandInBook.run, id=book_id(queue), task_queue=queue,
                                       id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
    try:
        given = await client.execute_update_with_start_workflow(
            StandInBook.give, stand_in.model_dump(mode="json"), start_workflow_operation=start)
    except WorkflowUpdateFailedError as error:
        raise HTTPException(422, str(getattr(error.cause, "message", error))) from None
    return shown(StandIn.model_validate(given), now())


@router.get("")
async def hand_overs(request: Request, person: str = Depends(caller)) -> dict[str, list[dict[str, Any]]]:
    """The hand-overs you gave and those you received (ended ones for a day after)."""
    at = now()
    stand_ins = await book(request)
    return {"given": [shown(s, at) for s in stand_ins if s.from_ == person],
            "received": [shown(s, at) for s in stand_ins if s.to == person]}


@router.delete("/{id}")
async def end_hand_over(id: str, request: Request, person: str = Depends(caller)) -> dict[str, Any]:
    """End a hand-over you gave (or one you received): from now on it decides nothing."""
    if not any(s.id == id and person in (s.from_, s.to) for s in await book(request)):
        raise HTTPException(404, f"no hand-over {id!r} of yours")
    gateway = temporal(request)
    handle = (await gateway.get()).get_workflow_handle(book_id(await gateway.queue()))
    try:
        ended = await handle.execute_update(StandInBook.end, {"id": id, "by": person})
    except WorkflowUpdateFailedError as error:
        raise HTTPException(404, str(getattr(error.cause, "message", error))) from None
    return shown(StandIn.model_validate(ended), now())


async def delegators_for(request: Request, person: str) -> list[StandIn]:
    """The live hand-overs `person` received, where the policy (as it reads now) still allows them."""
    if not allows_hand_overs(operator_policy(request)):
        return []  # no book to read: nobody stands in for anyone
    at = now()
    return [s for s in await book(request) if s.to == person and s.live(at)]


def stood_in_for(request: Request, received: list[StandIn], person: str, item: dict[str, Any],
                 session: SessionFacts, verb: str) -> str | None:
    """Whom `person` may `verb` the call for as their stand-in: a delegator whose live hand-over
    covers its tool, who may decide it (the access table), under both people's four eyes, where the
    policy lets the tool be handed over. None when nobody."""
    policy = operator_policy(request)
    tool = str(item.get("tool", "?"))
    if policy is None or verb not in STAND_IN_VERBS or not policy.allows_delegation(tool):
        return None
    for delegator in delegators_of(received, person, tool, now()):
        if not verdict(delegator, table_action(verb), session, policy, item, verb).allowed:
            continue
        if refusal_to_stand_in(CallRules.of(item), person, delegator, verb, expand=policy.expand) is None:
            return delegator
    return None


def table_action(verb: str) -> Action:
    """The access table's action for a verb: taking and giving back a call is `claim`."""
    return "claim" if verb in ("claim", "release") else "decide"


def waits_for_stand_in(request: Request, received: list[StandIn], person: str, item: dict[str, Any],
                       session: SessionFacts) -> str | None:
    """Whom an inbox row waits for that `person` may decide as their stand-in (None: nobody)."""
    policy = operator_policy(request)
    tool = str(item.get("tool", "?"))
    if policy is None or not policy.allows_delegation(tool):
        return None
    if person in (item.get("approvals") or []) or person in (item.get("stood_in") or []):
        return None  # one vote each, as themself or for someone
    rules = CallRules.of(item)
    for delegator in delegators_of(received, person, tool, now()):
        if (waits_for_person(delegator, item, session, policy)
                and refusal_to_stand_in(rules, person, delegator, consenting(rules), expand=policy.expand) is None):
            return delegator
    return None


async def stand_in_grant(request: Request, session_id: str, call_id: str, person: str, verb: str,
                         refused: HTTPException) -> Grant:
    """The grant to decide the call as someone's stand-in (its `for_person`), when `refused` said
    the person may not decide it themself; `refused` again otherwise, or a reason naming the
    hand-over that covered the call and is over."""
    if verb not in STAND_IN_VERBS or not allows_hand_overs(operator_policy(request)):
        raise refused
    stand_ins = [s for s in await book(request) if s.to == person]
    if not stand_ins:
        raise refused
    try:
        session = await session_facts(request, session_id)
        item = await pending_item(request, session_id, call_id)
    except HTTPException:
        raise refused from None
    if is_below(item):
        raise refused  # a sub-agent's call is decided by its own approvers, not their stand-ins
    at = now()
    delegator = stood_in_for(request, [s for s in stand_ins if s.live(at)], person, item, session, verb)
    if delegator is not None:
        return Grant(person, session, item, for_person=delegator)
    if verb == "release" and holds(person, item, at):
        # Giving back a claim only lets others decide: a hand-over that ended while its stand-in
        # held the call does not keep it from the delegator until the claim runs out.
        return Grant(person, session, item)
    raise over_or(refused, request, stand_ins, item, session, verb, at)


def holds(person: str, item: dict[str, Any], at: datetime) -> bool:
    """Whether `person` holds a live claim on the call, as its pending item says."""
    if item.get("claimed_by") != person:
        return False
    try:
        return datetime.fromisoformat(str(item.get("claim_until"))) > at
    except (TypeError, ValueError):
        return False  # an end the API cannot read grants nothing


def over_or(refused: HTTPException, request: Request, stand_ins: list[StandIn], item: dict[str, Any],
            session: SessionFacts, verb: str, at: datetime) -> HTTPException:
    """A clear reason when a hand-over that would have covered the call is over; `refused` else."""
    policy = operator_policy(request)
    tool = str(item.get("tool", "?"))
    for stand_in in stand_ins:
        if stand_in.live(at) or not stand_in.names_tool(tool):
            continue
        if verdict(stand_in.from_, table_action(verb), session, policy, item, verb).allowed:
            ended = stand_in.ended_at or stand_in.until
            return HTTPException(403, f"{stand_in.to} may not decide {tool} for {stand_in.from_}: the hand-over "
                                      f"{stand_in.id} ended at {ended.isoformat()}")
    return refused
