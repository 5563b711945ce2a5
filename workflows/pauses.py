"""Pauses for a person: what is pending, what a person decided, how it settled.

Everything here is pure and deterministic, so the workflow can call it from
signal handlers, update validators and the loop alike. `decide` is the single
rule book: a signal that breaks a rule is recorded as refused, an Update that
breaks it is rejected by its validator, both with the same reason.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workflows.conversation import answer_as_tool_result
from workflows.forms import check_answer, describe_validation_error

if TYPE_CHECKING:
    from activities.tools.catalog import ToolCatalog

PauseKind = Literal["approval", "question", "review"]
Outcome = Literal[
    "approved", "edited", "rejected", "answered", "declined", "timed_out", "moved_on", "cancelled"
]


class Refusal(Exception):
    """A decision that matches no pending item or breaks a rule; it changes nothing."""


class PendingCall(BaseModel):
    call_id: str
    kind: PauseKind
    tool: str
    args: dict[str, Any]
    question: str | None = None
    choices: list[str] | None = None
    fields: list[dict[str, Any]] | None = None
    requested_at: datetime
    deadline: datetime | None = None

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call_id: str | None = None
    by: str | None = None


class Approve(_Decision):
    verb: ClassVar[str] = "approve"
    args: dict[str, Any] | None = None
    comment: str | None = None


class Reject(_Decision):
    verb: ClassVar[str] = "reject"
    reason: str | None = None


class Answer(_Decision):
    verb: ClassVar[str] = "answer"
    answer: str | int | float | bool | dict[str, Any] | list[Any]


Decision = Union[Approve, Reject, Answer]
DECISION_TYPES: dict[str, type[Decision]] = {"approve": Approve, "reject": Reject, "answer": Answer}


class Settlement(BaseModel):
    """How a pending call ended: run it (`run_with`), or hand the model `result`."""

    call_id: str
    tool: str
    outcome: Outcome
    at: datetime
    by: str | None = None
    run_with: dict[str, Any] | None = None
    result: str | None = None
    note: str | None = None


def parse_decision(verb: str, payload: Any) -> Decision:
    if verb == "answer" and not isinstance(payload, dict) and payload is not None:
        payload = {"answer": payload}  # `--input '"Shanghai"'` answers the one pending question
    try:
        return DECISION_TYPES[verb].model_validate(payload if payload is not None else {})
    except ValidationError as error:
        raise Refusal(f"malformed {verb}: {describe_validation_error(error)}") from None


class Pauses(BaseModel):
    """Open pauses, and the settlements the loop has not collected yet."""

    open: list[PendingCall] = Field(default_factory=list)
    settled: dict[str, Settlement] = Field(default_factory=dict)
    decided: dict[str, str] = Field(default_factory=dict)

    def request(self, item: PendingCall) -> None:
        self.open.append(item)

    def is_waiting(self) -> bool:
        return bool(self.open)

    def next_deadline(self) -> datetime | None:
        deadlines = [item.deadline for item in self.open if item.deadline is not None]
        return min(deadlines) if deadlines else None

    def decide(self, decision: Decision, catalog: ToolCatalog, now: datetime) -> Settlement:
        """Check a decision against the rules and say how it would settle its call."""
        item = self._target(decision)
        if isinstance(decision, Answer):
            if item.kind != "question":
                raise Refusal(f"{item.call_id} is an {item.kind} of {item.tool}; use approve or reject")
            try:
                answer = check_answer(decision.answer, item.choices, item.fields)
            except ValueError as error:
                raise Refusal(f"answer refused: {error}") from None
            return self._settlement(item, "answered", now, decision.by, result=answer_as_tool_result(answer))
        if isinstance(decision, Reject):
            reason = decision.reason or "no reason given"
            who = decision.by or "a person"
            if item.kind == "question":
                return self._settlement(
                    item, "declined", now, decision.by, result=f"{who} declined to answer. Reason: {reason}"
                )
            return self._settlement(
                item, "rejected", now, decision.by,
                result=f"Rejected by {who}; the tool did not run. Reason: {reason}",
            )
        if item.kind != "approval":
            raise Refusal(f"{item.call_id} is a question; answer it (or reject to decline)")
        comment = f" Approver's comment: {decision.comment}" if decision.comment else ""
        if decision.args is None or decision.args == item.args:
            return self._settlement(
                item, "approved", now, decision.by, run_with=item.args, note=comment.strip() or None
            )
        edited = _validated_args(catalog, item.tool, decision.args)
        note = (
            f"A person ({decision.by or 'unnamed'}) edited the arguments before approving; "
            f"the tool ran with {json.dumps(edited, ensure_ascii=False)}, not the arguments you proposed.{comment}"
        )
        return self._settlement(item, "edited", now, decision.by, run_with=edited, note=note)

    def settle(self, settlement: Settlement) -> None:
        self.open = [item for item in self.open if item.call_id != settlement.call_id]
        self.settled[settlement.call_id] = settlement
        self.decided[settlement.call_id] = settlement.outcome

    def expire(self, now: datetime, timeouts: dict[PauseKind, float]) -> list[Settlement]:
        expired = [item for item in self.open if item.deadline is not None and item.deadline <= now]
        for item in expired:
            self.settle(
                self._settlement(
                    item, "timed_out", now,
                    result=f"No answer within {timeouts[item.kind]:g} seconds; cancelled. The tool did not run.",
                )
            )
        return [self.settled[item.call_id] for item in expired]

    def settle_all(self, outcome: Outcome, result: str, now: datetime) -> list[Settlement]:
        items = list(self.open)
        for item in items:
            self.settle(self._settlement(item, outcome, now, result=result))
        return [self.settled[item.call_id] for item in items]

    def collect(self, call_id: str) -> Settlement:
        return self.settled.pop(call_id)

    def _target(self, decision: Decision) -> PendingCall:
        verb = decision.verb
        if decision.call_id is None:
            if not self.open:
                raise Refusal(f"nothing is pending to {verb}")
            if len(self.open) > 1:
                ids = ", ".join(item.call_id for item in self.open)
                raise Refusal(f"{len(self.open)} calls are pending ({ids}); say which call_id to {verb}")
            return self.open[0]
        for item in self.open:
            if item.call_id == decision.call_id:
                return item
        if decision.call_id in self.decided:
            raise Refusal(f"{decision.call_id} is already settled ({self.decided[decision.call_id]})")
        raise Refusal(f"unknown call_id {decision.call_id!r}")

    @staticmethod
    def _settlement(item: PendingCall, outcome: Outcome, now: datetime, by: str | None = None, **how: Any) -> Settlement:
        return Settlement(call_id=item.call_id, tool=item.tool, outcome=outcome, at=now, by=by, **how)


def deadline_after(now: datetime, seconds: float | None) -> datetime | None:
    return now + timedelta(seconds=seconds) if seconds else None


def _validated_args(catalog: ToolCatalog, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    spec = catalog.get(tool)
    if spec is None:
        raise Refusal(f"tool {tool!r} is no longer available")
    try:
        return spec.parse(args).model_dump(mode="json")
    except ValidationError as error:
        raise Refusal(f"edited args do not fit {tool}: {describe_validation_error(error)}") from None
