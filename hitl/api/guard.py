"""The access table (hitl/access.py) as FastAPI dependencies: every session route names its action.

`Depends(allowed("read"))` authenticates the caller, reads the session's facts
with one describe (its memos: no query, no replay), and answers 404 or 403 from
the table before the route runs; the route gets a `Grant`. Reads also take one
of the person's read slots (hitl/api/reading.py) for as long as they run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, AsyncIterator, Callable

from fastapi import Depends, HTTPException, Request
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from hitl.access import Action, Policy, SessionFacts, may_decide, verdict
from hitl.api.auth import caller
from hitl.api.followed import now
from hitl.api.gateway import chain_of, refuse_other_chain, run_query, temporal
from hitl.client.sessions import read_all
from workflows.contract import AUDIT_PAGE, PENDING

RPC = timedelta(seconds=30)
# A child session's id (docs/interface.md, Sub-agents): its root's, then `/<agent>/<n>` per level.
CHILD_ID = re.compile(r"^(?P<root>[A-Za-z0-9][A-Za-z0-9._:@-]{0,199})(?P<below>(?:/[A-Za-z0-9_-]{1,40}/[1-9][0-9]{0,8}){1,4})$")


@dataclass(frozen=True)
class Grant:
    """Who may go on, and what the session's memos said."""

    person: str
    session: SessionFacts
    item: dict[str, Any] | None = None
    # Someone who may not read the session but decides calls of its children (their approver):
    # the calls, as the session lists them, that they may see; None for whoever reads it all.
    only_calls: tuple[str, ...] | None = None
    # Whom the person decides the call for, as their stand-in (hitl/api/delegations.py).
    for_person: str | None = None


def policy_as_written(request: Request) -> Policy | None:
    """The operator's policy as its file says now (hitl/api/followed.py)."""
    return now(request.app.state.policy)


def policy_of(request: Request) -> Policy | None:
    """The operator's policy as it reads for the caller: with `groups_from_identity`, the groups
    their OpenID token vouches for count."""
    policy = policy_as_written(request)
    who = getattr(request.state, "identity", None)
    if policy is None or who is None or not who.groups:
        return policy
    return policy.as_seen_by(who.person, who.groups)


async def session_facts(request: Request, session_id: str) -> SessionFacts:
    """One describe: the run, whether it is closed, and its memos `hitl_session` and `hitl_pending`."""
    return await facts_of((await temporal(request).get()).get_workflow_handle(session_id))


async def facts_of(handle: WorkflowHandle[Any, Any]) -> SessionFacts:
    """`session_facts` for a handle (an event stream's feed, which outlives its request):
    404 for an unknown session, 503 when Temporal does not answer."""
    return await facts_from(handle.id, await described(handle))


async def described(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription:
    try:
        return await handle.describe(rpc_timeout=RPC)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, f"unknown session {handle.id!r}") from None
        raise HTTPException(503, f"Temporal did not answer: {error.message}") from None


async def facts_from(session_id: str, description: WorkflowExecutionDescription) -> SessionFacts:
    memo: dict[str, Any] = {}
    for key in ("hitl_session", "hitl_pending"):
        try:  # a memo this API cannot decode (another key) says nothing, so grants nothing
            memo[key] = await description.memo_value(key, None)
        except Exception:
            memo[key] = None
    closed = description.status != WorkflowExecutionStatus.RUNNING
    return SessionFacts.from_memo(session_id, description.run_id or "", closed, memo, chain_of(description))


async def child_facts(request: Request, session_id: str, person: str) -> SessionFacts:
    """A child session's facts, for whoever may read its root (docs/interface.md, Sub-agents): the
    root's facts decide (404 for whoever has no role there)."""
    shape = CHILD_ID.match(session_id)
    if shape is None:
        raise HTTPException(422, f"session id {session_id!r}: a child session's id is <root id>/<agent>/<n>, "
                                 "at most 4 levels deep, as the root's pending lists it")
    root = shape["root"]
    refuse_unless(verdict(person, "read", await session_facts(request, root), policy_of(request)))
    return await descendant_facts(request, root, session_id)


async def descendant_facts(request: Request, root: str, session_id: str) -> SessionFacts:
    """The facts of `session_id`, a session below `root`: each session from the root down must be
    one its parent started (Temporal's parent link), not one that only took a child's id, and
    started since the root's chain of runs began: a root id used again after its session closed
    (a new session under the old id) is not the old tree's root."""
    shape = CHILD_ID.match(session_id)
    if shape is None or shape["root"] != root:
        raise HTTPException(404, f"unknown session {session_id!r}: no child session of {root!r}")
    client = await temporal(request).get()
    began = await chain_start(client, root)
    parts, parent, description = shape["below"].split("/")[1:], root, None
    for level in range(0, len(parts), 2):
        child = f"{parent}/{parts[level]}/{parts[level + 1]}"
        description = await described(client.get_workflow_handle(child))
        if description.parent_id != parent or description.start_time < began:
            raise HTTPException(404, f"unknown session {session_id!r}: {child!r} is no child session of {parent!r}")
        parent = child
    assert description is not None  # the pattern names at least one level
    return await facts_from(session_id, description)


async def chain_start(client: Client, session_id: str) -> datetime:
    """When the session's chain of runs (its first run, continued as new since) began."""
    newest = await described(client.get_workflow_handle(session_id))
    first = chain_of(newest)
    if first == newest.run_id:
        return newest.start_time
    return (await described(client.get_workflow_handle(session_id, run_id=first))).start_time


def refuse_unless(decided: Any) -> None:
    if not decided.allowed:
        raise HTTPException(decided.status, decided.reason)


def allowed(action: Action, calls_below: bool = False) -> Callable[..., Any]:
    """The dependency for `action` on the session named by the path's `session_id`. With
    `calls_below` (the pending route), a child's approver who may not read the session is granted
    the calls below it that they may decide, and only those (`Grant.only_calls`)."""

    async def grant(request: Request, session_id: str, person: str = Depends(caller)) -> AsyncIterator[Grant]:
        if action != "read":
            yield await granted(request, session_id, person, action)
            return
        async with request.app.state.reads.slot(person):
            if "/" in session_id:  # a child's, on the read routes that take one (hitl/api/sessions.py)
                yield Grant(person, await child_facts(request, session_id, person))
                return
            if calls_below:
                yield await granted_or_calls_below(request, session_id, person)
                return
            yield await granted(request, session_id, person, action)

    return grant


async def granted(request: Request, session_id: str, person: str, action: Action) -> Grant:
    """The table's answer for `action` on the session, for a door that is not a session route (AG-UI)."""
    session = await session_facts(request, session_id)
    refuse_unless(verdict(person, action, session, policy_of(request)))
    return Grant(person, session)


def allowed_on_call(verb: str) -> Callable[..., Any]:
    """The dependency for a decision (`verb`) on the path's `call_id`: the call's own rules from the
    session's `pending` query (the memo clips), 404 for whoever may not even read the session."""

    async def grant(request: Request, session_id: str, call_id: str, person: str = Depends(caller)) -> Grant:
        return await grant_on_call(request, session_id, call_id, person, verb)

    return grant


async def grant_on_call(request: Request, session_id: str, call_id: str, person: str, verb: str,
                        issued_in: str | None = None) -> Grant:
    """What `allowed_on_call` checks, for a person a door has proven otherwise than by a bearer
    token (a Slack user that `people` maps, hitl/api/slack.py; an email link's person,
    hitl/api/decide_links.py). `issued_in`: the chain of runs the link or button was issued in;
    a session of another chain under the same id answers 410."""
    try:
        return await own_grant_on_call(request, session_id, call_id, person, verb, issued_in)
    except HTTPException as refused:
        # Not theirs: perhaps theirs to decide for someone away (hitl/api/delegations.py, set by the
        # app: that module reads this one).
        for_someone = getattr(request.app.state, "stand_in_grant", None)
        if for_someone is None or refused.status_code not in (403, 404):
            raise
        granted: Grant = await for_someone(request, session_id, call_id, person, verb, refused)
        return granted


async def own_grant_on_call(request: Request, session_id: str, call_id: str, person: str, verb: str,
                            issued_in: str | None = None) -> Grant:
    """The grant to decide the call as oneself (the access table's rule)."""
    action: Action = "claim" if verb in ("claim", "release") else "decide"
    session = await session_facts(request, session_id)
    refuse_other_chain(session_id, issued_in, session.chain)
    policy = policy_of(request)
    if not verdict(person, "read", session, policy).allowed:
        return await grant_below_for_outsider(request, session, call_id, person, verb)
    item = await pending_item(request, session_id, call_id)
    refuse_unless(verdict(person, action, session, policy, item, verb))
    if is_below(item):
        if not str(item["session_id"]).startswith(f"{session_id}/"):
            raise HTTPException(404, f"no call {call_id!r} waits in session {session_id!r}")
        return await grant_in_child(request, session_id, item, person, verb)
    return Grant(person, session, item)


def is_below(item: dict[str, Any]) -> bool:
    """A child session's call, as its root lists it (docs/interface.md, Sub-agents)."""
    return bool(item.get("session_id") and item.get("child_call_id"))


async def grant_in_child(request: Request, root: str, item: dict[str, Any], person: str, verb: str) -> Grant:
    """A child's call listed by its root: the same rules, asked of the child and its own open call,
    which is what is decided. Only a session below the root, and only the call as listed: what the
    person saw is what counts."""
    child, child_item = await child_call(request, root, item)
    return decided_in_child(request, person, verb, item, child, child_item)


async def child_call(request: Request, root: str, item: dict[str, Any]) -> tuple[SessionFacts, dict[str, Any]]:
    """The child session a root's item names (verified to be of the root's tree) and its open call."""
    child = await descendant_facts(request, root, str(item["session_id"]))
    return child, await pending_item(request, child.session_id, item["child_call_id"])


def decided_in_child(request: Request, person: str, verb: str, item: dict[str, Any], child: SessionFacts,
                     child_item: dict[str, Any]) -> Grant:
    action: Action = "claim" if verb in ("claim", "release") else "decide"
    refuse_unless(verdict(person, action, child, policy_of(request), child_item, verb))
    if child_item.get("args_sha256") != item.get("args_sha256"):
        raise HTTPException(409, f"{item['call_id']} changed in session {child.session_id}: read it again")
    return Grant(person, child, child_item)


async def grant_below_for_outsider(request: Request, session: SessionFacts, call_id: str, person: str,
                                   verb: str) -> Grant:
    """A call of a session below this one, for someone who may not read this one: theirs to decide
    when the child's own rules let them decide that call (docs/interface.md, Sub-agents). Anyone
    else gets the 404 of an unknown session, whether such a call waits (or waited) or not; the
    child's approver then gets the child's refusals (four eyes, a claim, changed arguments) as a
    reader of the root would."""
    unknown = HTTPException(404, f"unknown session {session.session_id!r}")
    if session.closed or not call_id.startswith(f"{session.session_id}/"):
        raise unknown
    try:
        item = await pending_item(request, session.session_id, call_id)
        if not is_below(item):
            raise unknown
        child, child_item = await child_call(request, session.session_id, item)
    except HTTPException:
        raise unknown from None
    if not may_decide(person, child_item, child, policy_of(request)):
        raise unknown
    return decided_in_child(request, person, verb, item, child, child_item)


async def granted_or_calls_below(request: Request, session_id: str, person: str) -> Grant:
    """A read of the session's pending calls: the whole of it for whoever may read the session; for
    a child's approver who may not, the calls below it they may decide (404 when there are none)."""
    session = await session_facts(request, session_id)
    policy = policy_of(request)
    readable = verdict(person, "read", session, policy)
    if readable.allowed:
        return Grant(person, session)
    theirs = await calls_below_decided_by(request, session, person, policy)
    if not theirs:
        refuse_unless(readable)
    return Grant(person, session, only_calls=theirs)


async def calls_below_decided_by(request: Request, session: SessionFacts, person: str,
                                 policy: Policy | None) -> tuple[str, ...]:
    """The calls the session lists from its children that the children's own rules (their memos:
    each child's open calls) let `person` decide."""
    if session.closed:
        return ()
    listed = [item for item in await run_query(request, session.session_id, PENDING)
              if is_below(item) and str(item["session_id"]).startswith(f"{session.session_id}/")]
    theirs: list[str] = []
    for child_id in sorted({str(item["session_id"]) for item in listed}):
        try:
            child = await descendant_facts(request, session.session_id, child_id)
        except HTTPException:
            continue
        open_calls = {call.get("call_id"): call for call in child.pending}
        theirs += [item["call_id"] for item in listed if item["session_id"] == child_id
                   and (own := open_calls.get(item["child_call_id"])) is not None
                   and may_decide(person, own, child, policy)]
    return tuple(theirs)


async def pending_item(request: Request, session_id: str, call_id: str) -> dict[str, Any]:
    """The open pause for `call_id`: 404 for an unknown call, 409 for a settled one."""
    for item in await run_query(request, session_id, PENDING):
        if item["call_id"] == call_id:
            return item
    settled = await settlement_of(request, session_id, call_id)
    if settled is not None:
        raise HTTPException(409, f"{call_id} is already settled ({settled})")
    raise HTTPException(404, f"no call {call_id!r} waits in session {session_id!r}")


async def settlement_of(request: Request, session_id: str, call_id: str) -> str | None:
    """How the call was settled, from the audit across runs ("approved by ana via email at ..."),
    or None while it was not (asked once the call no longer waits: an approval of N-of-M is recorded too)."""
    trail = await read_all(await temporal(request).get(), session_id, AUDIT_PAGE.name, "events")
    events = [event for event in trail
              if event.get("call_id") == call_id and event["event"] not in ("refused", "requested")]
    if not events:
        return None
    last = events[-1]
    return " ".join([last["event"], *(f"{word} {last[key]}" for word, key in (("by", "by"), ("via", "via"), ("at", "at"))
                                       if last.get(key))])


async def session_read(request: Request, grant: Grant, name: str, read: Callable[[], Any]) -> Any:
    """`read()` once per closed run: a closed run never changes, so its answer is kept (hitl/api/reading.py)."""
    if not grant.session.closed:
        return await read()
    key = (grant.session.session_id, grant.session.run_id, name)
    cached = request.app.state.closed_reads.get(key)
    if cached is None:
        cached = await read()
        request.app.state.closed_reads.put(key, cached)
    return cached
