"""`GET /inbox`: every open pause across sessions that the caller may decide, oldest first.

One visibility list and each listed session's memos (`hitl_pending`: its open
pauses, `hitl_session`: owner and participants): no session is queried. Which
rows the caller may decide is the access table's (hitl/access.py), the same
rule the decision routes apply. A row claimed by someone else stays, marked
with `claimed_by` and `claim_until`: the claim is bounded, and the others
should see who holds the call and until when.

The list is narrowed by `HitlApprovers`: sessions whose open calls name the
caller or one of the caller's policy groups, or name nobody (then the owner,
participants and operators decide, which the memos tell).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from hitl.access import Policy, SessionFacts, waits_for_person
from hitl.api.auth import caller
from hitl.api.delegations import delegators_for, waits_for_stand_in
from hitl.api.gateway import temporal
from hitl.api.guard import policy_of
from workflows.stand_ins import StandIn
from hitl.client.inbox import (
    LIMIT, MEMO_KEY, InboxItem, UnreadableMemo, escaped, executions, items_of, visibility_query,
)
from hitl.client.inbox_filters import FilterError, filter_from_query

router = APIRouter(tags=["inbox"])
SESSION_MEMO = "hitl_session"


@router.get("/inbox", response_model=list[InboxItem])
async def inbox(
    request: Request,
    person: str = Depends(caller),
    claimed: bool = Query(True, description="kept for older clients: claimed items are always listed, marked"),
    tool: str | None = Query(None, description="only calls of this tool"),
    requested_by: str | None = Query(None, description="only calls this person asked for"),
    older_than: str | None = Query(None, description="only calls waiting longer than this: 30m, 2h, 1d or an ISO moment"),
    session: str | None = Query(None, description="only this session's calls"),
) -> list[InboxItem]:
    """The caller's waiting items on this API's task queue, oldest first (the oldest 100 that match
    the filters; `arg.<name>=value` also keeps only calls whose argument has that value, as JSON or
    as text). Visibility lags by a moment: a decision on a row that was settled meanwhile answers 409."""
    try:
        wanted = filter_from_query(request.query_params.multi_items())
    except FilterError as error:
        raise HTTPException(422, str(error)) from None
    gateway = temporal(request)
    client = await gateway.get()
    policy = policy_of(request)
    received = await delegators_for(request, person)
    query = visibility_query(await gateway.queue()) + approvers_filter(person, policy, [s.from_ for s in received])
    try:
        async with request.app.state.reads.slot(person):  # one of the person's reads (hitl/api/reading.py)
            rows = await listed(client, query)
    except RPCError as error:
        if error.status == RPCStatusCode.INVALID_ARGUMENT and "Hitl" in error.message:
            raise HTTPException(503, f"this namespace lacks the sessions' search attributes ({error.message})") from None
        raise
    now = datetime.now(timezone.utc)
    items = wanted.kept(row for session, item in rows if (row := listed_for(request, person, session, item, policy, received)))
    for item in items:
        item.age_seconds = max(0.0, (now - item.requested_at).total_seconds())
    items.sort(key=lambda item: (item.requested_at, item.session_id, item.call_id))
    return items[:LIMIT]


def listed_for(request: Request, person: str, session: SessionFacts, item: InboxItem, policy: Policy | None,
               received: list[StandIn]) -> InboxItem | None:
    """The row as the caller sees it: theirs to decide, or someone's they stand in for (marked
    `for`: a sub-agent's call is left to its own approvers); None when neither."""
    if decides(person, session, item, policy):
        return at_its_root(item)
    if not received or "/" in item.session_id:
        return None
    for_person = waits_for_stand_in(request, received, person, item.model_dump(), session)
    return item.model_copy(update={"for_": for_person}) if for_person is not None else None


def at_its_root(item: InboxItem) -> InboxItem:
    """A sub-agent's call where the API reaches it: at its root session, whose `pending` lists it as
    `<child id>/<call id>` (workflows/delegating.py) and whose decision routes take it there. A
    child's id holds `/` (`<root>/<agent>/<n>`), which no session id of a route does."""
    if "/" not in item.session_id:
        return item
    root = item.session_id.split("/", 1)[0]
    return item.model_copy(update={"session_id": root, "call_id": f"{item.session_id}/{item.call_id}"})


def approvers_filter(person: str, policy: Policy | None, stood_in_for: list[str] | None = None) -> str:
    """Sessions whose calls may name `person` or someone they stand in for: by name, by one of
    their groups, or nobody named."""
    names: list[str] = []
    for someone in dict.fromkeys([person, *(stood_in_for or [])]):
        names += [someone, *(f"@{group}" for group in (policy.groups_of(someone) if policy is not None else []))]
    listed = ", ".join(f'"{escaped(name)}"' for name in names)
    return f" AND (HitlApprovers IN ({listed}) OR HitlApprovers IS NULL)"


def decides(person: str, session: SessionFacts, item: InboxItem, policy: Policy | None) -> bool:
    """The approver rule (workflows/deciders.py) as the access table applies it: the caller may
    decide the call, it is not their own request under four eyes, and they have not voted on it."""
    return waits_for_person(person, item.model_dump(), session, policy)


async def listed(client: Client, query: str) -> list[tuple[SessionFacts, InboxItem]]:
    """Every listed session's open pauses with the session's facts, page after page."""
    rows: list[tuple[SessionFacts, InboxItem]] = []
    async for execution in executions(client, query):
        session_id = execution.execution.workflow_id
        try:
            items = await items_of(client, session_id, execution.memo.fields.get(MEMO_KEY))
        except UnreadableMemo:  # encrypted under a key this API lacks, say: nothing it can show
            items = []
        about = await memo_of(client, execution.memo.fields.get(SESSION_MEMO))
        session = SessionFacts.from_memo(session_id, execution.execution.run_id, False,
                                         {SESSION_MEMO: about, MEMO_KEY: [item.model_dump() for item in items]})
        rows.extend((session, item) for item in items)
    return rows


async def memo_of(client: Client, payload: Any) -> Any:
    if payload is None:
        return None
    try:
        [value] = await client.data_converter.decode([payload])
        return value
    except Exception:  # noqa: BLE001 - anyone who reaches the frontend writes memos; KeyError: a key this API lacks
        return None
