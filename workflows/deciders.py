"""Who may decide an open call: the one rule the workflow, the API and the inboxes all call.

The workflow refuses a decision with it (workflows/pauses.py: the last word), the API refuses
the request before it reaches the session (hitl/access.py), and both inboxes show a person
only the calls that wait for them (hitl/client/inbox.py, hitl/api/inbox.py). One function, so
that what an inbox lists is what a decision would be allowed to do.

- A call that names approvers is decided by them alone (a question names none, unless an MCP
  server asks it during a call that waited for approval: then it is that call's decision).
- A call that names nobody is decided by anyone the session knows of; a caller that knows who
  belongs to the session (the API: owner, participants, operators) narrows that with `by_default`.
- Under four eyes, whoever asked for the call may not approve it, nor answer such a question
  (they may still reject or decline it).
- An inbox also leaves out what the person already approved: one vote each.

Pure: the workflow calls it in signal handlers and Update validators, so its reasons are the
exact words recorded in existing histories.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol

from pydantic import BaseModel, ValidationError

DEFAULT_DECIDERS = "the session's owner, participants and operators"


class OpenCall(Protocol):
    """What the rule reads of a pending call (workflows/pauses.py's PendingCall, an inbox row)."""

    # Read-only, so that a model whose `kind` is narrower (PendingCall's PauseKind) still fits.
    @property
    def kind(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def approvers(self) -> list[str] | None: ...
    @property
    def four_eyes(self) -> bool: ...
    @property
    def requested_by(self) -> str | None: ...
    @property
    def approvals(self) -> list[str]: ...


class CallRules(BaseModel):
    """An open call as a memo or the `pending` query gives it (a JSON object)."""

    kind: str = "approval"
    tool: str = "?"
    approvers: list[str] | None = None
    four_eyes: bool = False
    requested_by: str | None = None
    approvals: list[str] = []

    @classmethod
    def of(cls, item: dict[str, Any]) -> CallRules:
        """A malformed item grants nobody anything: it names approvers, and none of them."""
        try:
            return cls.model_validate(item)
        except ValidationError:
            return cls(tool=str(item.get("tool", "?")), approvers=[])


def refusal_to_decide(call: OpenCall, person: str | None, verb: str, *,
                      expand: Callable[[Iterable[str]], set[str]] | None = None,
                      by_default: Callable[[str], bool] | None = None) -> str | None:
    """Why `person` may not `verb` (approve, reject, answer, claim) the open call; None when they may.

    `expand` turns the approvers' @groups into people (the API's operator policy; the workflow
    matches names as written). `by_default` says who decides a call that names no approvers;
    without it, anyone does."""
    named = call.approvers  # a question names them only when it decides a call that waited for them
    if named is not None:
        if person is None:
            return f"only {', '.join(named)} may decide {call.tool}; say who you are (by)"
        if person not in (expand(named) if expand is not None else named):
            return f"{person} may not decide {call.tool}; approvers: {', '.join(named)}"
    elif by_default is not None and (person is None or not by_default(person)):
        return f"{person or 'nobody named'} may not decide {call.tool}; approvers: {DEFAULT_DECIDERS}"
    if verb == consenting(call) and call.four_eyes:
        if person is None:
            return "four-eyes rule: say who you are (by)"
        if person == call.requested_by:
            return f"four-eyes rule: {person} asked for this call and cannot approve it"
    return None


def consenting(call: OpenCall) -> str:
    """The verb that lets the call go on: answering a question, approving anything else."""
    return "answer" if call.kind == "question" else "approve"


def proven_members(person: str | None, groups: Iterable[str]) -> Callable[[Iterable[str]], set[str]]:
    """Names as written, and `person` wherever a group their proof says they are in is named (the
    workflow's `expand` for a verified decision under the policy's groups_from_identity)."""
    named_groups = {f"@{group}" for group in groups}

    def expand(names: Iterable[str]) -> set[str]:
        names = set(names)
        return names | ({person} if person is not None and names & named_groups else set())
    return expand


def waits_for(call: OpenCall, person: str, *,
              expand: Callable[[Iterable[str]], set[str]] | None = None,
              by_default: Callable[[str], bool] | None = None) -> bool:
    """Whether the call waits for `person`'s decision, as an inbox lists it: they may approve it
    (or answer it) and have not already given their vote."""
    return (refusal_to_decide(call, person, consenting(call), expand=expand, by_default=by_default) is None
            and person not in call.approvals)
