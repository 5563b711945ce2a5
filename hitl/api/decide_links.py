"""`GET` and `POST /decide/<token>`: the doors an email link opens (hitl/email_links.py).

No bearer token: the link's token is the credential, and it names the person.
Opening it (GET) decides nothing, since mail scanners open links: it shows the
card and one button. The button POSTs to the same address and decides through
`decide()` (hitl/api/calls.py) with `via="email"`, after the same access table
and call rules as the API (`grant_on_call`), as the person the link names.

A link counts only in the chain of runs it was issued in (the session's first
run's id, which a hand-over keeps): a session closed and started again under
the link's id is another chain, and there the link decides nothing (410, opened
or pressed), nor does the API sign a proof for it (`send_signed`'s `issued_in`).

CSRF: nothing here reads a cookie or any credential the browser adds by itself;
the only credential is the token in the address the form posts to, which a
forging site cannot know (256 bits of HMAC). A cross-site POST without it is an
altered link.

Single use: the first decision made from a mail uses up every link of that mail
(`UsedLinks`, in the API's state: every replica's, hitl/api/state/). Should that
be forgotten (memory state and a restart), the session is what refuses: a call
once settled refuses every decision (the page says who settled it and how), and
one person's approval counts once.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from hitl.api.calls import decide
from hitl.api.decide_page import confirm, decided, refused
from hitl.api.gateway import refuse_other_chain
from hitl.api.guard import Grant, grant_on_call, pending_item, session_facts
from hitl.api.state import ApiState
from hitl.decision_keys import link_key_of
from hitl.email_links import LinkClaims, LinkRefused, call_of, read_link_token

router = APIRouter(tags=["email links"])


# A decision from a mail takes at most this long; a replica that died making one frees its mail then.
DECIDING_SECONDS = 120
USED = "used"


class UsedLinks:
    """The mails whose decision was made (kept until their links expire) or is being made."""

    def __init__(self, store: ApiState) -> None:
        self.store = store

    @staticmethod
    def key(mail: str) -> str:
        return f"mail:{mail}"

    async def was_used(self, mail: str) -> bool:
        return await self.store.get(self.key(mail)) == USED

    async def take(self, mail: str) -> bool:
        """Whether this request may decide from the mail: neither used nor being used by another."""
        return await self.store.add_once(self.key(mail), DECIDING_SECONDS)

    async def done(self, mail: str, expires: int, decided: bool) -> None:
        if decided:
            await self.store.put(self.key(mail), USED, max(expires - time.time(), 1))
        else:
            await self.store.delete(self.key(mail))


def claims_of(request: Request, token: str) -> LinkClaims:
    _, key = request.app.state.signer()
    return read_link_token(link_key_of(key), token, time.time())


async def in_its_chain(request: Request, claims: LinkClaims) -> None:
    """LinkRefused unless the session under the link's id is the chain of runs it was issued in:
    before anything else is said about the call, which may be another session's by now."""
    if claims.chain is None:
        raise LinkRefused(410, "this link was made before links named the run of their session: it decides "
                               "nothing; decide in the inbox")
    try:
        refuse_other_chain(claims.session_id, claims.chain, (await session_facts(request, claims.session_id)).chain)
    except HTTPException as refusal:
        raise LinkRefused(refusal.status_code, str(refusal.detail)) from None


async def settled_refusal(request: Request, claims: LinkClaims, why: str) -> LinkRefused | None:
    """`why`, and how the call was settled (409), or that it waits no more (410); None while it waits."""
    try:
        await pending_item(request, claims.session_id, claims.call_id)
    except HTTPException as gone:
        if gone.status_code == 409:  # its detail says who settled it, how and when (guard.settlement_of)
            return LinkRefused(409, f"{why}{gone.detail} (session {claims.session_id})")
        return LinkRefused(410, f"{why}{call_of(claims)} waits no more")
    return None


async def used_refusal(request: Request, claims: LinkClaims) -> LinkRefused:
    why = "this mail's links were used already: "
    return await settled_refusal(request, claims, why) or LinkRefused(410, f"{why}{call_of(claims)} waits for others")


async def granted(request: Request, claims: LinkClaims) -> Grant:
    """The API's own grant for the link's person on its call, and the arguments the mail showed."""
    if await request.app.state.used_links.was_used(claims.mail):
        raise await used_refusal(request, claims)
    try:
        grant = await grant_on_call(request, claims.session_id, claims.call_id, claims.person, claims.verb,
                                    issued_in=claims.chain)
    except HTTPException as refusal:
        # Once settled, the call is no longer the person's to read (404): the link still says who settled it.
        settled = await settled_refusal(request, claims, "") if refusal.status_code == 404 else None
        raise settled or LinkRefused(refusal.status_code, str(refusal.detail)) from None
    assert grant.item is not None
    if grant.item["args_sha256"] != claims.args_sha256:
        raise LinkRefused(409, f"the arguments of {call_of(claims)} changed since this mail: decide it in the inbox")
    return grant


@router.get("/decide/{token}")
async def show(token: str, request: Request) -> HTMLResponse:
    """The card and one button; nothing is decided."""
    try:
        claims = claims_of(request, token)
        await in_its_chain(request, claims)
        grant = await granted(request, claims)
    except LinkRefused as refusal:
        return refused(refusal.status, str(refusal))
    assert grant.item is not None
    return confirm(claims, grant.item)


@router.post("/decide/{token}")
async def decide_by_link(token: str, request: Request) -> HTMLResponse:
    """The decision the link names, as its person, through the session's validated Update."""
    used: UsedLinks = request.app.state.used_links
    try:
        claims = claims_of(request, token)
        await in_its_chain(request, claims)
        if not await used.take(claims.mail):
            raise await used_refusal(request, claims)
    except LinkRefused as refusal:
        return refused(refusal.status, str(refusal))
    made = False
    try:
        grant = await granted(request, claims)
        await decide(request, claims.session_id, claims.call_id, claims.verb, grant, fields_of(claims), via="email",
                     issued_in=claims.chain)
        made = True
    except LinkRefused as refusal:
        return refused(refusal.status, str(refusal))
    except HTTPException as refusal:
        return refused(refusal.status_code, str(refusal.detail))
    finally:
        await used.done(claims.mail, claims.expires, made)
    assert grant.item is not None
    return decided(claims, grant.item)


def fields_of(claims: LinkClaims) -> dict[str, Any]:
    """The decision's fields: the arguments the mail showed (the session refuses it if they
    changed since), or the question's choice."""
    if claims.verb == "answer":
        return {"answer": claims.answer}
    return {"expected_args_sha256": claims.args_sha256}
