"""Pauses for a person: what is pending, what a person decided, how it settled.

Everything here is pure and deterministic, so the workflow can call it from
signal handlers, Update validators and the loop alike. `Pauses.decide` is the
single rule book: a signal that breaks a rule is recorded as refused, an
Update that breaks it is rejected by its validator, both with the same reason.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Union

from pydantic import BaseModel, Field, ValidationError
from temporalio import workflow

from workflows.conversation import answer_as_tool_result
from workflows.deciders import proven_members, refusal_to_decide
from workflows.decisions import Answer, Approve, Claim, Decision, Refusal, Reject, Release
from workflows.forms import MAX_ANSWER, check_answer, describe_validation_error
from workflows.limits import utf8_size
from workflows.requests import MessageRef
from workflows.rules import Remember, args_sha256
from workflows.stand_ins import refusal_to_stand_in, second_vote_refusal

with workflow.unsafe.imports_passed_through():
    from hitl.catalog.schema_tools import ArgumentsRejected, validate_arguments

if TYPE_CHECKING:
    from hitl.catalog.specs import ToolCatalog

MESSAGES_PER_PAUSE = 50
PauseKind = Literal["approval", "question", "review"]
Outcome = Literal[
    "approved", "edited", "rejected", "answered", "declined", "timed_out", "moved_on", "cancelled"
]


class PendingCall(BaseModel):
    """One tool call waiting for a person, with the rules that govern it."""

    call_id: str
    kind: PauseKind
    tool: str
    args: dict[str, Any]
    args_sha256: str
    question: str | None = None
    choices: list[str] | None = None
    fields: list[dict[str, Any]] | None = None
    result: str | None = None
    requested_at: datetime
    deadline: datetime | None = None
    requested_by: str | None = None
    approvers: list[str] | None = None
    required_approvals: int = 1
    approvals: list[str] = Field(default_factory=list)
    # Who gave one of the approvals as someone's stand-in (workflows/stand_ins.py): one vote each.
    stood_in: list[str] | None = None
    four_eyes: bool = False
    remind_at: datetime | None = None
    escalate_at: datetime | None = None
    claimed_by: str | None = None
    claim_until: datetime | None = None

    def claimant(self, now: datetime) -> str | None:
        """Who holds the item now; a claim past its time holds nothing."""
        if self.claimed_by is None or self.claim_until is None or self.claim_until <= now:
            return None
        return self.claimed_by
    # The tool's server marks it destructive (MCP's destructiveHint): said in the pending item.
    destructive: bool | None = None
    # The JSON schema the call was planned with, for tools whose schema lives outside this code.
    input_schema: dict[str, Any] | None = None
    # What the person deciding should see beside the call (docs/interface.md, "The web inbox": the card).
    verified: bool | None = None  # are identities on this session verified (or only asserted)?
    led_by: str | None = None  # the user message the call followed
    model_text: str | None = None  # what the model said in the reply that made the call
    description: str | None = None  # the tool's own description
    because: str | None = None  # why a person is needed: the rule or policy line
    remember_allowed: bool | None = None  # False when the operator's policy forbids remembering it
    # A question its tool's MCP server asks (workflows/tool_input.py): which server, and for a URL its domain.
    server: str | None = None
    url: str | None = None
    domain: str | None = None

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True, exclude={"input_schema"})

    def next_event(self) -> datetime | None:
        moments = [m for m in (self.deadline, self.remind_at, self.escalate_at) if m is not None]
        return min(moments) if moments else None


class Settlement(BaseModel):
    """How a pending call ended: run it (`run_with`), or hand the model `result`."""

    call_id: str
    tool: str
    kind: PauseKind
    outcome: Outcome
    at: datetime
    args_sha256: str
    by: str | None = None
    for_person: str | None = None  # whom `by` decided for, as their stand-in
    via: str | None = None
    run_with: dict[str, Any] | None = None
    result: str | None = None
    note: str | None = None
    comment: str | None = None
    rule: str | None = None
    remember: Remember | None = None
    requested_by: str | None = None  # whose request it was: a remembered approval covers only theirs
    answer: Any = None  # the checked answer to a tool server's question, sent back on the retried call


class Vote(BaseModel):
    """One approval of several required: the call keeps waiting for the others."""

    call_id: str
    tool: str
    by: str
    for_person: str | None = None  # whom `by` approved for, as their stand-in: the vote counts as theirs
    via: str | None = None
    args: dict[str, Any] | None = None
    comment: str | None = None
    rule: str


Verdict = Union[Settlement, Vote]


class ClaimVerdict(BaseModel):
    call_id: str
    by: str
    until: datetime | None
    for_person: str | None = None  # whom `by` holds the call for, as their stand-in


def _iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment else "?"


class Pauses(BaseModel):
    """Open pauses, and the settlements the loop has not collected yet."""

    open: list[PendingCall] = Field(default_factory=list)
    settled: dict[str, Settlement] = Field(default_factory=dict)
    decided: dict[str, str] = Field(default_factory=dict)
    # The messages each pause was shown in, by call id, kept until its `settled` notice takes them.
    shown: dict[str, list[MessageRef]] = Field(default_factory=dict)

    def show(self, call_id: str, messages: list[MessageRef]) -> None:
        """Remember where a pause was shown; at most MESSAGES_PER_PAUSE (the notify activity's
        result, which this reads, is not to be trusted with the session's size)."""
        if messages:
            kept = self.shown.setdefault(call_id, [])
            kept.extend(messages[: max(0, MESSAGES_PER_PAUSE - len(kept))])

    def request(self, item: PendingCall) -> None:
        self.open.append(item)

    def is_waiting(self) -> bool:
        return bool(self.open)

    def next_event(self) -> datetime | None:
        moments = [m for m in (item.next_event() for item in self.open) if m is not None]
        return min(moments) if moments else None

    def decide(self, decision: Decision, catalog: ToolCatalog, now: datetime,
               groups: tuple[str, ...] = (), for_person: str | None = None) -> Verdict:
        """Check a decision against every rule and say what it would do, and through which door
        (`groups`: those its proof vouches its person is in; `for_person`: whom its proof says its
        person decides for, as their stand-in)."""
        verdict = self._judge(decision, catalog, now, groups, for_person)
        if for_person is not None:
            verdict = verdict.model_copy(update={"for_person": for_person})
        return verdict.model_copy(update={"via": decision.via}) if decision.via is not None else verdict

    def _judge(self, decision: Decision, catalog: ToolCatalog, now: datetime,
               groups: tuple[str, ...] = (), for_person: str | None = None) -> Verdict:
        item = self._target(decision)
        holder = item.claimant(now)
        if holder is not None and holder != decision.by:
            raise Refusal(f"{item.call_id} is claimed by {holder} until {_iso(item.claim_until)}", code="conflict")
        if decision.expected_args_sha256 and decision.expected_args_sha256 != item.args_sha256:
            raise Refusal(
                f"stale decision: {item.call_id}'s arguments are now {item.args_sha256}, "
                f"not {decision.expected_args_sha256}", code="conflict",
            )
        if isinstance(decision, Answer):
            if item.kind == "question":  # names approvers only when it decides a call that waited for them
                self._check_decider(item, decision, groups, for_person)
            elif for_person is not None:
                raise Refusal(f"{decision.by} may answer only a question that waits for {for_person}", code="forbidden")
            return self._answer(item, decision, now)
        self._check_decider(item, decision, groups, for_person)
        if isinstance(decision, Reject):
            return self._reject(item, decision, now)
        if item.kind == "question":
            raise Refusal(f"{item.call_id} is a question; answer it (or reject to decline)", code="invalid")
        if item.kind == "review":
            return self._pass_review(item, decision, now)
        return self._approve(item, decision, catalog, now, for_person)

    def _answer(self, item: PendingCall, decision: Answer, now: datetime) -> Settlement:
        if item.kind != "question":
            raise Refusal(f"{item.call_id} is an {item.kind} of {item.tool}; use approve or reject", code="invalid")
        try:
            answer = check_answer(decision.answer, item.choices, item.fields)
        except ValueError as error:
            raise Refusal(f"answer refused: {error}", code="invalid") from None
        return _settle(item, "answered", now, decision.by, answer=answer if item.server is not None else None,
                       result=answer_as_tool_result(answer, by=decision.by, verified=item.verified is True))

    def _reject(self, item: PendingCall, decision: Reject, now: datetime) -> Settlement:
        reason = decision.reason or "no reason given"
        who = decision.by or "a person"
        text = {
            "question": f"{who} declined to answer. Reason: {reason}",
            "approval": f"Rejected by {who}; the tool did not run. Reason: {reason}",
            "review": f"A person rejected this result: {reason}",
        }[item.kind]
        outcome: Outcome = "declined" if item.kind == "question" else "rejected"
        return _settle(item, outcome, now, decision.by, result=text, comment=decision.reason)

    def _pass_review(self, item: PendingCall, decision: Approve, now: datetime) -> Settlement:
        if decision.args is not None:
            raise Refusal(f"{item.call_id} has already run; a review may replace its result, not its args", code="invalid")
        comment = f"\n\nReviewer's comment: {decision.comment}" if decision.comment else ""
        if decision.result is None:
            return _settle(item, "approved", now, decision.by, result=f"{item.result}{comment}", comment=decision.comment)
        edited = decision.result if isinstance(decision.result, str) else json.dumps(decision.result, ensure_ascii=False)
        if utf8_size(edited) > MAX_ANSWER:
            raise Refusal(f"the replacement result is longer than {MAX_ANSWER} bytes", code="invalid")
        text = f"A person ({decision.by or 'unnamed'}) edited this result before you saw it.\n\n{edited}{comment}"
        return _settle(item, "edited", now, decision.by, result=text, comment=decision.comment)

    def _approve(self, item: PendingCall, decision: Approve, catalog: ToolCatalog, now: datetime,
                 for_person: str | None = None) -> Verdict:
        if decision.result is not None:
            raise Refusal(f"{item.call_id} has not run yet; edit its args, not its result", code="invalid")
        edited = None if decision.args is None or decision.args == item.args else _validated_args(catalog, item, decision.args)
        if decision.remember and item.remember_allowed is False:
            raise Refusal(f"the operator's policy does not let a decision on {item.tool} be remembered", code="forbidden")
        if decision.remember and for_person is not None:
            raise Refusal(f"a decision for {for_person} is not remembered; approve it without remember", code="invalid")
        if decision.remember and item.required_approvals > 1:
            raise Refusal(f"{item.tool} needs {item.required_approvals} approvals; one person cannot remember it", code="invalid")
        if item.required_approvals > 1 and decision.by is None:
            raise Refusal(f"{item.tool} needs {item.required_approvals} distinct approvers: say who you are (by)", code="forbidden")
        approvals = [] if edited is not None else list(item.approvals)
        if for_person is not None:
            twice = second_vote_refusal(approvals, [] if edited is not None else item.stood_in or [], decision.by, for_person)
            if twice is not None:
                raise Refusal(twice, code="forbidden")
        elif decision.by is not None and decision.by in approvals:
            raise Refusal(f"{decision.by} already approved {item.call_id}; it needs another person", code="forbidden")
        elif decision.by is not None and decision.by in (item.stood_in or []) and edited is None:
            raise Refusal(f"{decision.by} already approved {item.call_id} for someone else; it needs another person",
                          code="forbidden")
        count = len(approvals) + 1
        rule = f"{count} of {item.required_approvals} approvals" if item.required_approvals > 1 else None
        if count < item.required_approvals and decision.by is not None:
            return Vote(call_id=item.call_id, tool=item.tool, by=decision.by, args=edited, comment=decision.comment, rule=rule or "")
        if edited is None:
            return _settle(
                item, "approved", now, decision.by, run_with=item.args, rule=rule,
                note=f"Approver's comment: {decision.comment}" if decision.comment else None,
                comment=decision.comment, remember=decision.remember,
            )
        note = (
            f"A person ({decision.by or 'unnamed'}) edited the arguments before approving; "
            f"the tool ran with {json.dumps(edited, ensure_ascii=False)}, not the arguments you proposed."
            + (f" Approver's comment: {decision.comment}" if decision.comment else "")
        )
        return _settle(
            item, "edited", now, decision.by, run_with=edited, note=note, rule=rule,
            comment=decision.comment, remember=decision.remember,
        )

    def _check_decider(self, item: PendingCall, decision: Approve | Reject | Answer | Claim, groups: tuple[str, ...] = (),
                       for_person: str | None = None) -> None:
        """Who may decide the call (workflows/deciders.py: the rule the API and the inboxes share);
        `groups`: those the decision's proof vouches its person is in; `for_person`: whom it decides
        for as their stand-in (workflows/stand_ins.py: the rules hold for both)."""
        if for_person is not None:
            refusal = (refusal_to_stand_in(item, decision.by, for_person, decision.verb) if decision.by is not None
                       else "a stand-in must say who they are (by)")
        else:
            refusal = refusal_to_decide(item, decision.by, decision.verb,
                                        expand=proven_members(decision.by, groups) if groups else None)
        if refusal is not None:
            raise Refusal(refusal, code="forbidden")

    def claim(self, decision: Claim, now: datetime, groups: tuple[str, ...] = (),
              for_person: str | None = None) -> ClaimVerdict:
        """Who may take an item is who may decide it (`for_person`: whom its proof says its person
        takes it for, as their stand-in); a live claim of someone else's stands."""
        item = self._target(decision)
        if decision.by is None:
            raise Refusal(f"say who you are (by) to claim {item.call_id}", code="forbidden")
        self._check_decider(item, decision, groups, for_person)
        holder = item.claimant(now)
        if holder is not None and holder != decision.by:
            raise Refusal(f"{item.call_id} is claimed by {holder} until {_iso(item.claim_until)}", code="conflict")
        return ClaimVerdict(call_id=item.call_id, by=decision.by, until=now + timedelta(seconds=decision.for_seconds),
                            for_person=for_person)

    def release(self, decision: Release, now: datetime, for_person: str | None = None) -> ClaimVerdict:
        """Only the holder gives a claim back (`for_person`: whom they held it for, for the audit)."""
        item = self._target(decision)
        holder = item.claimant(now)
        if holder is None:
            raise Refusal(f"{item.call_id} is not claimed", code="conflict")
        if holder != decision.by:
            raise Refusal(f"{item.call_id} is claimed by {holder}; only they can release it", code="conflict")
        return ClaimVerdict(call_id=item.call_id, by=holder, until=None, for_person=for_person)

    def hold(self, verdict: ClaimVerdict) -> PendingCall:
        """Apply a claim (or, with no `until`, its release)."""
        item = next(item for item in self.open if item.call_id == verdict.call_id)
        item.claimed_by, item.claim_until = (verdict.by, verdict.until) if verdict.until else (None, None)
        return item

    def apply(self, verdict: Verdict) -> None:
        if isinstance(verdict, Settlement):
            self.settle(verdict)
            return
        item = next(item for item in self.open if item.call_id == verdict.call_id)
        if verdict.args is not None:
            item.args, item.args_sha256, item.approvals = verdict.args, args_sha256(verdict.args), []
            item.stood_in = None
        item.approvals.append(verdict.for_person or verdict.by)
        if verdict.for_person is not None:
            item.stood_in = [*(item.stood_in or []), verdict.by]

    def settle(self, settlement: Settlement) -> None:
        self.open = [item for item in self.open if item.call_id != settlement.call_id]
        self.settled[settlement.call_id] = settlement
        self.decided[settlement.call_id] = settlement.outcome

    def due(self, now: datetime) -> list[PendingCall]:
        return [item for item in self.open if (item.next_event() or now + timedelta(days=1)) <= now]

    def expire(self, item: PendingCall, timeout_seconds: float, now: datetime) -> Settlement:
        settlement = _settle(item, "timed_out", now, result=unsettled_text(item, f"No answer within {timeout_seconds:g} seconds"))
        self.settle(settlement)
        return settlement

    def settle_all(self, outcome: Outcome, why: str, now: datetime) -> list[Settlement]:
        settlements = [_settle(item, outcome, now, result=unsettled_text(item, why)) for item in self.open]
        for settlement in settlements:
            self.settle(settlement)
        return settlements

    def collect(self, call_id: str) -> Settlement:
        return self.settled.pop(call_id)

    def _target(self, decision: Decision | Claim | Release) -> PendingCall:
        verb = decision.verb
        if decision.call_id is None:
            if not self.open:
                raise Refusal(f"nothing is pending to {verb}", code="not_found")
            if len(self.open) > 1:
                ids = ", ".join(item.call_id for item in self.open)
                raise Refusal(f"{len(self.open)} calls are pending ({ids}); say which call_id to {verb}", code="conflict")
            return self.open[0]
        for item in self.open:
            if item.call_id == decision.call_id:
                return item
        if decision.call_id in self.decided:
            raise Refusal(f"{decision.call_id} is already settled ({self.decided[decision.call_id]})", code="conflict")
        raise Refusal(f"unknown call_id {decision.call_id!r}", code="not_found")


def unsettled_text(item: PendingCall, why: str) -> str:
    """What the model reads when nobody decided: why, and what did not happen."""
    if item.kind == "review":
        return f"{why}; the result was withheld from you."
    return f"{why}; cancelled. The tool did not run."


def _settle(item: PendingCall, outcome: Outcome, now: datetime, by: str | None = None, **how: Any) -> Settlement:
    return Settlement(
        call_id=item.call_id, tool=item.tool, kind=item.kind, outcome=outcome, at=now, by=by,
        args_sha256=item.args_sha256, requested_by=item.requested_by, **how,
    )


def deadline_after(now: datetime, seconds: float | None) -> datetime | None:
    return now + timedelta(seconds=seconds) if seconds else None


def _validated_args(catalog: ToolCatalog, item: PendingCall, args: dict[str, Any]) -> dict[str, Any]:
    """Edited arguments, checked as the model's were: against the schema recorded with the
    call when there is one (it replays the same whatever the tool's server offers now; its
    regexes are left to the tool activity, see hitl/catalog/schema_tools.py), else against the
    worker's catalog."""
    tool = item.tool
    try:
        if item.input_schema is not None:
            return validate_arguments(item.input_schema, args, regexes=False)
        spec = catalog.get(tool)
        if spec is None:
            raise Refusal(f"tool {tool!r} is no longer available", code="conflict")
        return spec.check(args)[0]
    except ValidationError as error:
        raise Refusal(f"edited args do not fit {tool}: {describe_validation_error(error)}", code="invalid") from None
    except ArgumentsRejected as error:
        raise Refusal(f"edited args do not fit {tool}: {error}", code="invalid") from None
