"""Who may do what to a session: one table, read by every route through `hitl/api/guard.py`.

docs/security.md, "Who may see and act on a session". A person holds roles on a
session (owner, participant, operator) and on each open call (approver); the
table says which roles allow which action. Nothing here talks to Temporal:
the facts come from the session's memos (`hitl_session`, `hitl_pending`), read
with one describe, so deciding who may read costs no query and no replay.

Someone with no role at all learns nothing, not even that the session exists:
the answer is the 404 of an unknown session. Someone who may read but not act
gets 403 with the reason. The worker's channels read the same table
(activities/audience.py): a card goes to nobody who may not read its session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Protocol

from workflows.deciders import CallRules, refusal_to_decide, waits_for

Action = Literal["read", "message", "cancel", "decide", "claim"]
Role = Literal["owner", "participant", "operator", "decider", "approver"]

# The access table. "decider": may decide one of the session's open calls (so may read it);
# "approver": may decide *this* call (its approvers, or else the owner, participants and operators).
ACCESS: dict[Action, frozenset[Role]] = {
    "read": frozenset({"owner", "participant", "operator", "decider"}),
    "message": frozenset({"owner", "participant", "operator"}),
    "cancel": frozenset({"owner", "participant", "operator"}),
    "decide": frozenset({"approver"}),
    "claim": frozenset({"approver"}),
}
SESSION_ROLES: frozenset[Role] = frozenset({"owner", "participant", "operator"})


class Policy(Protocol):
    """What the API needs of the operator policy (workflows/policy.py's OperatorPolicy)."""

    groups: dict[str, list[str]]
    operators: list[str]

    def expand(self, names: Iterable[str]) -> set[str]: ...
    def as_seen_by(self, person: str, groups: Iterable[str]) -> Policy: ...
    def groups_of(self, person: str) -> list[str]: ...
    def is_operator(self, person: str) -> bool: ...
    def may_start(self, person: str) -> bool: ...
    def loosened_by(self, session_input: dict[str, Any]) -> list[str]: ...


@dataclass(frozen=True)
class SessionFacts:
    """What the session's memos say about it: whose it is and what waits in it."""

    session_id: str
    run_id: str
    closed: bool
    owner: str | None = None
    participants: tuple[str, ...] = ()
    pending: tuple[dict[str, Any], ...] = ()
    verified: bool = False
    chain: str = ""  # the session's chain of runs (its first run's id); "" where it was not read

    @classmethod
    def from_memo(cls, session_id: str, run_id: str, closed: bool, memo: dict[str, Any], chain: str = "") -> SessionFacts:
        about = memo.get("hitl_session")
        about = about if isinstance(about, dict) else {}
        owner = about.get("owner") if isinstance(about.get("owner"), str) else None
        participants = tuple(name for name in about.get("participants") or () if isinstance(name, str))
        pending = memo.get("hitl_pending")
        items = tuple(item for item in pending if isinstance(item, dict)) if isinstance(pending, list) else ()
        return cls(session_id, run_id, closed, owner, participants, () if closed else items,
                   bool(about.get("verified")), chain)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    status: int = 200
    reason: str = ""
    roles: frozenset[Role] = field(default_factory=frozenset)


def expanded(names: Iterable[str], policy: Policy | None) -> set[str]:
    """People and @groups to people; without a policy a group names nobody."""
    names = list(names)
    if policy is not None:
        return policy.expand(names)
    return {name for name in names if not name.startswith("@")}


def is_operator(person: str, policy: Policy | None) -> bool:
    return policy is not None and policy.is_operator(person)


def session_roles(person: str, session: SessionFacts, policy: Policy | None) -> set[Role]:
    roles: set[Role] = set()
    if session.owner is not None and person == session.owner:
        roles.add("owner")
    if person in expanded(session.participants, policy):
        roles.add("participant")
    if is_operator(person, policy):
        roles.add("operator")
    if any(may_decide(person, item, session, policy) for item in session.pending):
        roles.add("decider")
    return roles


def belongs_to(person: str, session: SessionFacts, policy: Policy | None) -> bool:
    """The session's owner, a participant or an operator: who decides a call that names no approvers."""
    return person == session.owner or person in expanded(session.participants, policy) or is_operator(person, policy)


def session_people(session: SessionFacts, policy: Policy | None) -> set[str]:
    """Everyone `belongs_to` the session, by name: whom a pause that names no approvers waits for."""
    operators = expanded(policy.operators, policy) if policy is not None else set()
    return {*([session.owner] if session.owner else []), *expanded(session.participants, policy), *operators}


def may_read(person: str, session: SessionFacts, policy: Policy | None) -> bool:
    """Whether the person may see the session at all (anyone else is told it does not exist)."""
    return bool(session_roles(person, session, policy) & ACCESS["read"])


def decider_refusal(person: str, item: dict[str, Any], session: SessionFacts, policy: Policy | None,
                    verb: str) -> str | None:
    """The one approver rule (workflows/deciders.py), with groups expanded by the policy and the
    session's own people deciding calls that name no approvers."""
    return refusal_to_decide(CallRules.of(item), person, verb, expand=lambda names: expanded(names, policy),
                             by_default=lambda someone: belongs_to(someone, session, policy))


def may_decide(person: str, item: dict[str, Any], session: SessionFacts, policy: Policy | None) -> bool:
    """Whether the person is one who decides the call (four eyes aside: they may still reject it)."""
    return decider_refusal(person, item, session, policy, "reject") is None


def waits_for_person(person: str, item: dict[str, Any], session: SessionFacts, policy: Policy | None) -> bool:
    """What an inbox lists for the person: the rule of workflows/deciders.py, as this API applies it."""
    return waits_for(CallRules.of(item), person, expand=lambda names: expanded(names, policy),
                     by_default=lambda someone: belongs_to(someone, session, policy))


def verdict(person: str, action: Action, session: SessionFacts, policy: Policy | None,
            item: dict[str, Any] | None = None, verb: str | None = None) -> Verdict:
    """The table's answer for `person` doing `action` (on `item`, one open call, for decide and claim)."""
    roles = session_roles(person, session, policy)
    if not roles & ACCESS["read"]:
        return Verdict(False, 404, f"unknown session {session.session_id!r}")
    if item is not None and may_decide(person, item, session, policy):
        roles.add("approver")
    frozen = frozenset(roles)
    refusal = decider_refusal(person, item, session, policy, verb or action) if item is not None else None
    if roles & ACCESS[action]:
        if refusal is not None:  # an approver, but not for this verb: four eyes
            return Verdict(False, 403, refusal, frozen)
        return Verdict(True, roles=frozen)
    if action in ("decide", "claim") and refusal is not None:
        return Verdict(False, 403, refusal, frozen)
    return Verdict(False, 403, f"{person} may read this session but not {action} it: only its owner, "
                               "participants and the operators may", frozen)


def may_start(person: str, policy: Policy | None) -> Verdict:
    if policy is None or policy.may_start(person):
        return Verdict(True)
    return Verdict(False, 403, f"{person} may not start sessions (the operator's policy, sessions.may_start)")
