"""The session's signals and Updates: each a line that hands its raw payload to workflows/inbound.py.

Payloads arrive raw (RawValue) and are decoded there, so that one nested past
any parser's limit, or in an unknown encoding, is a recorded refusal rather
than a task failure or a log line nobody reads. Each signal has an Update twin
whose validator runs the same decision function and raises what the signal
would record (see STYLE: never two copies of a rule).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

from workflows.contract import ANSWER, APPROVE, CANCEL, CLAIM, REJECT, RELEASE, USER_MESSAGE, WAIT_UNTIL_SETTLED
from workflows.inbound import decoded, refused
from workflows.decisions import Refusal
from workflows.agent_parts import AgentParts

# Temporal admits 10 Updates in flight per workflow; waiters beyond this many answer the oldest
# at once, so callers that wait for ever (an `after_event` nobody reaches) leave room for decisions.
MAX_WAITERS = 4


class Handlers(AgentParts):
    """Mixed into AgentWorkflow: registered under these method names, as they always were."""

    @workflow.signal(name=USER_MESSAGE.signal.name)
    def user_message(self, payload: RawValue) -> None:
        self.signal_or_record(USER_MESSAGE.verb, payload, self.receive_message)

    @workflow.update(name=USER_MESSAGE.update.name)
    def user_message_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(USER_MESSAGE.verb, payload, self.receive_message)

    @user_message_update.validator
    def check_user_message(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.session.run_state.verifier.check_message(
            self.parse_message(value), workflow.info().workflow_id, workflow.now(), self.run_check(recording=False)))

    @workflow.signal(name=APPROVE.signal.name)
    def approve(self, payload: RawValue) -> None:
        self.signal_or_record(APPROVE.verb, payload, self.approve_call)

    @workflow.update(name=APPROVE.update.name)
    def approve_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(APPROVE.verb, payload, self.approve_call)

    @approve_update.validator
    def check_approve(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.decide("approve", value))

    @workflow.signal(name=REJECT.signal.name)
    def reject(self, payload: RawValue) -> None:
        self.signal_or_record(REJECT.verb, payload, self.reject_call)

    @workflow.update(name=REJECT.update.name)
    def reject_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(REJECT.verb, payload, self.reject_call)

    @reject_update.validator
    def check_reject(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.decide("reject", value))

    @workflow.signal(name=ANSWER.signal.name)
    def answer(self, payload: RawValue) -> None:
        self.signal_or_record(ANSWER.verb, payload, self.answer_call)

    @workflow.update(name=ANSWER.update.name)
    def answer_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(ANSWER.verb, payload, self.answer_call)

    @answer_update.validator
    def check_answer(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.decide("answer", value))

    @workflow.signal(name=CANCEL.signal.name)
    def cancel(self, payload: RawValue) -> None:
        self.signal_or_record(CANCEL.verb, payload, self.request_cancel)

    @workflow.update(name=CANCEL.update.name)
    def cancel_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(CANCEL.verb, payload, self.request_cancel)

    @cancel_update.validator
    def check_cancel(self, payload: RawValue) -> None:
        self.validate(payload, self.parse_cancel)

    @workflow.signal(name=CLAIM.signal.name)
    def claim(self, payload: RawValue) -> None:
        self.signal_or_record(CLAIM.verb, payload, self.claim_call)

    @workflow.update(name=CLAIM.update.name)
    def claim_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(CLAIM.verb, payload, self.claim_call)

    @claim_update.validator
    def check_claim(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.judge_claim("claim", value))

    @workflow.signal(name=RELEASE.signal.name)
    def release(self, payload: RawValue) -> None:
        self.signal_or_record(RELEASE.verb, payload, self.release_call)

    @workflow.update(name=RELEASE.update.name)
    def release_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail(RELEASE.verb, payload, self.release_call)

    @release_update.validator
    def check_release(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.judge_claim("release", value))

    # A session that ends (or fails at start) while someone waits has nothing more to say.
    @workflow.update(name=WAIT_UNTIL_SETTLED.name, unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def wait_until_settled(self, payload: RawValue) -> dict[str, Any]:
        """Answers once the session stops running (a pause, an answer, closed) after the event
        id `after_event` (default 0: the first turn), so a caller gets the outcome of its
        message in one request. It also answers, perhaps still running, when the run hands over
        to a new one (continue-as-new) and when more than MAX_WAITERS wait (the oldest): the
        caller asks again."""
        self.checks.history_moved_on()  # accepted: recorded in the history
        try:
            request = decoded(payload) or {}
            after = int(request.get("after_event", 0)) if isinstance(request, dict) else 0
        except (Refusal, TypeError, ValueError, OverflowError):
            after = 0
        self.session.waiters_seen += 1
        waiter = self.session.waiters_seen
        self.session.waiters.append(waiter)
        if len(self.session.waiters) > MAX_WAITERS:
            self.session.waiters.pop(0)  # the oldest answers now, with the session as it is
        try:
            await workflow.wait_condition(
                lambda: (self.session.state != "running" and self.session.settled_event > after and not self.next_turn_is_queued())
                or self.session.handing_over or waiter not in self.session.waiters
            )
        finally:
            if waiter in self.session.waiters:
                self.session.waiters.remove(waiter)
        return {"status": self.status(), "pending": self.pending(), "event": self.session.run_state.events.last_id}

    def next_turn_is_queued(self) -> bool:
        """Idle with a message waiting: its turn starts as soon as the loop runs (next_user_turn)."""
        return self.session.behaviours.settles_after_queued_messages and self.session.state == "idle" and bool(self.session.run_state.inbox)

    @wait_until_settled.validator
    def check_wait(self, payload: RawValue) -> None:
        """Any payload waits (a malformed one from the first turn); only a busy run refuses (refuse_while_busy)."""
        try:
            self.refuse_while_busy()
        except Refusal as refusal:
            raise refused(str(refusal), refusal.code) from None

    def approve_call(self, payload: Any) -> dict[str, Any]:
        return self.decide_and_apply("approve", payload)

    def reject_call(self, payload: Any) -> dict[str, Any]:
        return self.decide_and_apply("reject", payload)

    def answer_call(self, payload: Any) -> dict[str, Any]:
        return self.decide_and_apply("answer", payload)

    def claim_call(self, payload: Any) -> dict[str, Any]:
        return self.hold("claim", payload)

    def release_call(self, payload: Any) -> dict[str, Any]:
        return self.hold("release", payload)
