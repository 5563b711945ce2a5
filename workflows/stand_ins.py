"""Stand-ins: a person hands their decisions to another for a while (delegation, out of office).

Ana, away for a week, names bob her stand-in for `delete_file` until Friday; until then bob decides
what ana may decide, "for ana". Not to be confused with sub-agents (workflows/delegating.py), which
hand a *task* to a child session.

The rules here are pure, shared by the API (which finds the stand-in's delegator and signs the
proof `by: bob, for: ana`), the book that keeps the hand-overs (workflows/stand_in_book.py) and the
session (which accepts such a proof only when the rules below hold for both people):

- the delegator must be a person who may decide the call by the session's rules;
- four eyes holds for both: whoever asked for the call may not approve it, neither as themself
  nor as anyone's stand-in, nor through a stand-in of their own;
- several approvals count people, not stand-ins: a delegator counts once, and one person gives
  one vote, as themself or for someone else, never both.
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from workflows.deciders import OpenCall, consenting, refusal_to_decide

LONGEST = timedelta(days=30)  # a hand-over lasts at most this long; give a new one to go on
GIVEN_AT_MOST = 20  # live hand-overs a person may have given at one time
BOOK_AT_MOST = 2_000  # live hand-overs the book keeps, all people together


class StandIn(BaseModel):
    """One hand-over: `from_` lets `to` decide for them, until `until` (or until it is ended)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    id: str
    from_: str = Field(alias="from")
    to: str
    tools: list[str] | None = None  # names or globs; None: every tool
    since: datetime
    until: datetime
    ended_at: datetime | None = None
    # The API's signature over the hand-over (hitl/api/delegations.py): the book is a workflow that
    # anyone who reaches Temporal could write to, so only what the API sealed is believed.
    seal: str | None = None

    def live(self, now: datetime) -> bool:
        return self.ended_at is None and self.since <= now < self.until

    def names_tool(self, tool: str) -> bool:
        return self.tools is None or any(fnmatchcase(tool, pattern) for pattern in self.tools)

    def covers(self, tool: str, now: datetime) -> bool:
        return self.live(now) and self.names_tool(tool)

    def sealed_by(self, trusted: dict[str, str]) -> bool:
        """Whether one of `trusted` (key id -> base64 Ed25519 public key) sealed it as it reads now.
        Only the API and the worker's activities check seals; importing cryptography here, not at the
        top, keeps it out of the workflow sandbox, which imports this module for its rules."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        key_id, _, signature = (self.seal or "").partition(".")
        if key_id not in trusted:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(base64.b64decode(trusted[key_id])).verify(
                base64.urlsafe_b64decode(signature), self.sealed_body())
        except (InvalidSignature, ValueError):
            return False
        return True

    def sealed_body(self) -> bytes:
        """What the seal signs: every field but the seal and its end (ending needs no new seal)."""
        return self.model_copy(update={"seal": None, "ended_at": None}).model_dump_json(by_alias=True).encode()


def refusal_to_stand_in(call: OpenCall, delegate: str, delegator: str, verb: str, *,
                        expand: Callable[[Iterable[str]], set[str]] | None = None) -> str | None:
    """Why `delegate` may not `verb` the open call for `delegator`; None when they may."""
    if delegate == delegator:
        return f"{delegate} cannot decide for themself as a stand-in"
    refusal = refusal_to_decide(call, delegator, verb, expand=expand)
    if refusal is not None:
        return f"{delegate} decides for {delegator}, and {refusal}"
    if verb == consenting(call) and call.four_eyes and delegate == call.requested_by:
        return f"four-eyes rule: {delegate} asked for this call and cannot approve it, not even for {delegator}"
    return None


def second_vote_refusal(approvals: Sequence[str], stood_in: Sequence[str], by: str | None,
                        for_person: str | None) -> str | None:
    """Why this approval would count someone twice (`approvals`: the people counted so far;
    `stood_in`: who gave one of them as a stand-in); None when it counts a new person."""
    voter = for_person or by
    if voter is not None and voter in approvals:
        return f"{voter} already approved it; it needs another person"
    if for_person is not None and by in approvals:
        return f"{by} already approved it themself; one person gives one approval"
    if for_person is None and by is not None and by in stood_in:
        return f"{by} already approved it for someone else; one person gives one approval"
    return None


def delegators_of(stand_ins: Iterable[StandIn], delegate: str, tool: str, now: datetime) -> list[str]:
    """Who `delegate` stands in for on `tool` now, in the order they handed over."""
    found: list[str] = []
    for stand_in in stand_ins:
        if stand_in.to == delegate and stand_in.covers(tool, now) and stand_in.from_ not in found:
            found.append(stand_in.from_)
    return found


def refusal_to_hand_over(from_: str, to: str, until: datetime, now: datetime,
                         given: Iterable[StandIn]) -> str | None:
    """The rules of the book itself, whatever the operator's policy adds (hitl/api/delegations.py)."""
    if to == from_:
        return "a person cannot hand their decisions to themself"
    if until <= now:
        return f"until ({until.isoformat()}) is not in the future"
    if until - now > LONGEST:
        return f"a hand-over lasts at most {LONGEST.days} days; until is {until.isoformat()}"
    if sum(stand_in.from_ == from_ and stand_in.live(now) for stand_in in given) >= GIVEN_AT_MOST:
        return f"{from_} already has {GIVEN_AT_MOST} live hand-overs; end one first"
    return None
