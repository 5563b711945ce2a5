"""The decision verbs, each declared once: its signal, its Update twin and the Update's validator come from one row.

Every verb of the contract (workflows/contract.py, INBOUND) has a signal `<verb>` and an Update
`<verb>_update` with the same input. The signal records a refusal; the Update's validator runs the
same check and rejects with the same reason before anything is recorded; the Update's handler
applies the verb like the signal (workflows/inbound.py). `with_verb_handlers` makes the three
functions of each row of VERBS and sets them on the workflow class before `@workflow.defn` collects
its handlers, so a verb is written once and its three handlers cannot drift apart.

Payloads arrive raw (RawValue) and are decoded by the Inbound part, so that one nested past any
parser's limit, or in an unknown encoding, is a recorded refusal rather than a task failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RawValue

from workflows.contract import ANSWER, APPROVE, CANCEL, CLAIM, INBOUND, REJECT, RELEASE, USER_MESSAGE
from workflows.contract import Inbound as ContractEntry
from workflows.inbound import Inbound


class HasInbound(Protocol):
    """What a verb's handlers need of the workflow: its Inbound part."""

    inbound: Inbound


@dataclass(frozen=True)
class Verb:
    """A decision verb: its contract entry, what its handlers apply, and what its validator checks."""

    entry: ContractEntry[Any]
    apply: Callable[[Inbound, Any], dict[str, Any]]  # a decoded payload, applied (or a Refusal raised)
    check: Callable[[Inbound, Any], object]  # the same judgement, applying nothing (or a Refusal raised)

    @property
    def name(self) -> str:
        return self.entry.verb


def decision(entry: ContractEntry[Any]) -> Verb:
    """A person's decision on a pause: judged by the pause book (Inbound.decide), then applied."""
    return Verb(entry, apply=lambda inbound, value: inbound.decide_and_apply(entry.verb, value),
                check=lambda inbound, value: inbound.decide(entry.verb, value))


def hold(entry: ContractEntry[Any]) -> Verb:
    """A claim on a pause, or its release: judged by Inbound.judge_claim, then held."""
    return Verb(entry, apply=lambda inbound, value: inbound.hold(entry.verb, value),
                check=lambda inbound, value: inbound.judge_claim(entry.verb, value))


VERBS: tuple[Verb, ...] = (
    Verb(USER_MESSAGE, apply=Inbound.receive_message, check=Inbound.check_message),
    decision(APPROVE),
    decision(REJECT),
    decision(ANSWER),
    Verb(CANCEL, apply=Inbound.request_cancel, check=Inbound.parse_cancel),
    hold(CLAIM),
    hold(RELEASE),
)
assert {verb.name for verb in VERBS} == set(INBOUND), "every verb of the contract has its row, and only those"


def verb_handlers(verb: Verb) -> tuple[Callable[[HasInbound, RawValue], None],
                                      workflow.UpdateMethodMultiParam[[HasInbound, RawValue], dict[str, Any]]]:
    """The signal and the Update (its validator attached) of one verb, under the contract's names."""

    def on_signal(self: HasInbound, payload: RawValue) -> None:
        self.inbound.signal_or_record(verb.name, payload, lambda value: verb.apply(self.inbound, value))

    def on_update(self: HasInbound, payload: RawValue) -> dict[str, Any]:
        return self.inbound.update_or_fail(verb.name, payload, lambda value: verb.apply(self.inbound, value))

    def check(self: HasInbound, payload: RawValue) -> None:
        self.inbound.validate(payload, lambda value: verb.check(self.inbound, value))

    for function, name in ((on_signal, verb.entry.signal.name), (on_update, verb.entry.update.name),
                           (check, f"check_{verb.name}")):
        function.__name__ = function.__qualname__ = name
        # Typed for the checker; the SDK takes the first parameter as the instance only when it is
        # unannotated, and would otherwise read its type as the payload's.
        del function.__annotations__["self"]
    update = workflow.update(name=verb.entry.update.name)(on_update)
    update.validator(check)
    return workflow.signal(name=verb.entry.signal.name)(on_signal), update


W = TypeVar("W", bound=type)


def with_verb_handlers(cls: W) -> W:
    """Sets every verb's signal and Update on the workflow class, under the contract's names; put
    below `@workflow.defn`, which collects the class's handlers when it runs."""
    for verb in VERBS:
        signal, update = verb_handlers(verb)
        setattr(cls, verb.entry.signal.name, signal)
        setattr(cls, verb.entry.update.name, update)
    return cls
