"""`GET /inbox`: every open pause across sessions that the caller may decide, oldest first.

One visibility list and the sessions' memos (console/inbox.py): no session is
queried, so it answers as fast with ten thousand waiting sessions as with ten.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from api.auth import caller
from api.gateway import temporal
from console.inbox import InboxItem, read_inbox

router = APIRouter(tags=["inbox"])


@router.get("/inbox", response_model=list[InboxItem])
async def inbox(
    request: Request,
    person: str = Depends(caller),
    claimed: bool = Query(False, description="also show items someone else has claimed"),
) -> list[InboxItem]:
    """The caller's waiting items on this API's task queue. Visibility lags by a moment: a
    decision on a row that was settled meanwhile answers 409."""
    gateway = temporal(request)
    found = await read_inbox(await gateway.get(), task_queue=await gateway.queue(), person=person,
                             show_claimed=claimed)
    return found.items
