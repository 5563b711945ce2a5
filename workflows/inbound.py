"""What callers send, decided: decoding, the one rule book per verb, and refusals that are recorded.

Nothing a caller sends may fail a workflow task. A signal that is refused is
recorded (status, audit, events) and changes nothing; an Update's validator
raises the same refusal before anything is recorded; what reaches an Update's
handler and is refused (a decision without a valid proof, always) is audited
like a refused signal. Refusals carry a code (`invalid`, `conflict`, ...) that
the API maps to a status.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue

from workflows.agents import ForwardedToChild
from workflows.forms import describe_validation_error
from workflows.handover import IGNORED_SIGNALS_KEPT, newest
from workflows.identity import ProofRefusal, RunCheck, SpentProof
from workflows.limits import MAX_QUEUED_BYTES, RECORDED_BYTES, clip, utf8_size
from workflows.decisions import CLAIM_SECONDS_AT_MOST, Claim, DecisionBase, Refusal, parse_decision
from workflows.pauses import ClaimVerdict, Verdict, Vote
from workflows.recorder import STRAIGHT_THROUGH_TEMPORAL, Recorder, door
from workflows.rules import args_sha256, grant_from
from workflows.session import CancelRequest, UserMessage
from workflows.activity_calls import LocalChecks
from workflows.delegating import ChildPausesTable
from workflows.payloads import decoded, refused
from workflows.session_run import SessionRun
from workflows.waiting import Waiting

with workflow.unsafe.imports_passed_through():
    # The catalog holds tool schemas and approval policies; passed through so
    # the workflow sees the tools the worker registered, not a fresh copy.
    from hitl.catalog import CATALOG


def _recorded(value: Any) -> str | None:
    return clip(value, RECORDED_BYTES) if isinstance(value, str) else None


class Inbound:
    """A part of AgentWorkflow: the bodies behind its signals and Updates (workflows/handlers.py)."""

    def __init__(self, session: SessionRun, checks: LocalChecks, recorder: Recorder, waiting: Waiting, children: ChildPausesTable) -> None:
        self.session = session
        self.checks = checks
        self.recorder = recorder
        self.waiting = waiting
        self.children = children

    def refuse_while_busy(self) -> None:
        """No Update is accepted while a local activity's result is on its way. When sdk-core
        answers a query while a local activity's result waits, it may record the result in that
        task but give it to the workflow in the next, together with an Update that came meanwhile;
        the Python SDK applies the Update first, a replay applies the result in the earlier task,
        and the acceptance (a command) comes out on the other side of the commands that follow the
        result (docs/observability.md, tests/integration/test_handover_replays.py). A refused
        Update leaves no trace in history, so the run and its replay agree. Sent again a moment
        later (every client does: hitl/client/updates.py), it is taken.

        Only the local activity itself: a run that waits for its notifications before it hands
        over (up to a minute against a webhook that is down) takes Updates meanwhile, as it always
        did, and the transcript index it records next is a local activity like any other."""
        if self.checks.in_flight:
            raise Refusal("the session is checking something with its worker; nothing was applied, send it again",
                          code="busy")

    def refuse_if_closing(self) -> None:
        if self.session.state == "closed":
            raise Refusal("the session is closed", code="conflict")
        if self.session.run_state.cancel_reason is not None:
            raise Refusal("the session is being cancelled; no decision is accepted", code="conflict")

    def proven(self, decision: DecisionBase) -> tuple[Any, SpentProof | None]:
        """On a verified session, the decision as its proof says it was made (see workflows/identity.py)."""
        return self.session.run_state.verifier.check(decision, workflow.info().workflow_id, self.session.run_state.pauses.open,
                                             workflow.now(), self.run_check(recording=not self.session.validating))

    def run_check(self, recording: bool) -> RunCheck:
        """Proofs count for the run they were made for (see workflows/identity.py, RunCheck).

        A reset run replays, under its new run id, decisions the run it came from accepted; a
        refusal for another run is therefore recorded (a patch marker named by the proof), and on
        replay a proof for another run is refused exactly where such a marker was recorded. A
        validator records nothing (it commands nothing): there a proof for another run is refused.
        A proof for another chain of runs is refused alike on replay: the chain is the same in
        every run of it, a reset's too."""
        def refused_before(nonce: str) -> bool:
            return workflow.patched(f"hitl-proof-for-another-run-{nonce[:32]}") if recording else True
        info = workflow.info()
        chain = info.first_execution_run_id if self.session.behaviours.proofs_name_their_chain else None
        return RunCheck(run_id=info.run_id, refused_before=refused_before, chain=chain)

    def decide(self, verb: str, payload: Any) -> tuple[Verdict, SpentProof | None]:
        """The one rule book for decisions, shared by signals and Update validators."""
        self.refuse_if_closing()
        self.children.refer_to_child(payload)
        decision, proof = self.proven(parse_decision(verb, payload))
        return self.session.run_state.pauses.decide(decision, CATALOG, workflow.now(), groups=self.proven_groups(decision),
                                                    for_person=self.stood_in_for(decision)), proof

    def proven_groups(self, decision: Any) -> tuple[str, ...]:
        """The groups the decision's proof vouches for."""
        return self.session.run_state.verifier.groups_vouched(decision, workflow.now())

    def stood_in_for(self, decision: Any) -> str | None:
        """Whom the decision's proof says its person decides for, as their stand-in; refused on runs
        started before stand-ins were taken (workflows/patches.py)."""
        for_person = self.session.run_state.verifier.stood_in_for(decision, workflow.now())
        if for_person is not None and not self.session.behaviours.takes_stand_ins:
            raise Refusal(f"this session does not take decisions for another person; {for_person} decides themself",
                          code="forbidden")
        return for_person

    def decide_and_apply(self, verb: str, payload: Any) -> dict[str, Any]:
        try:
            verdict, proof = self.decide(verb, payload)
        except ForwardedToChild as forwarded:
            return self.children.forward(verb, payload, forwarded)
        self.session.run_state.verifier.spend(proof, workflow.now())
        return self.apply(verdict)

    def judge_claim(self, verb: str, payload: Any) -> tuple[ClaimVerdict, SpentProof | None]:
        self.refuse_if_closing()
        self.children.refer_to_child(payload)
        request, proof = self.proven(parse_decision(verb, payload))
        now = workflow.now()
        if isinstance(request, Claim) and request.for_seconds > CLAIM_SECONDS_AT_MOST:
            raise Refusal(f"a claim lasts at most {CLAIM_SECONDS_AT_MOST:g} seconds; claim again when it runs out", code="invalid")
        pauses = self.session.run_state.pauses
        for_person = self.claimed_for(request)
        verdict = (pauses.claim(request, now, self.proven_groups(request), for_person) if isinstance(request, Claim)
                   else pauses.release(request, now, for_person))
        return verdict, proof

    def claimed_for(self, request: Any) -> str | None:
        """Whom a claim's (or a release's) proof says its person holds the call for, as their
        stand-in; on runs started before stand-ins' claims (workflows/patches.py) it is not read,
        and the person is judged as themself."""
        if not self.session.behaviours.takes_stand_in_claims:
            return None
        return self.session.run_state.verifier.stood_in_for(request, workflow.now())

    def hold(self, verb: str, payload: Any) -> dict[str, Any]:
        try:
            verdict, proof = self.judge_claim(verb, payload)
        except ForwardedToChild as forwarded:
            return self.children.forward(verb, payload, forwarded)
        self.session.run_state.verifier.spend(proof, workflow.now())
        item = self.session.run_state.pauses.hold(verdict)
        until = item.claim_until.isoformat() if item.claim_until else None
        self.recorder.record("claimed" if until else "released", item.call_id, item.tool, item.args_sha256, by=verdict.by,
                             for_=verdict.for_person)
        self.session.run_state.events.add("claimed" if until else "released", workflow.now(), call_id=item.call_id, by=verdict.by, until=until)
        self.recorder.publish()
        return {"accepted": True, "call_id": item.call_id, "claimed_by": item.claimed_by, "claim_until": until}

    def apply(self, verdict: Verdict) -> dict[str, Any]:
        self.session.run_state.pauses.apply(verdict)
        if isinstance(verdict, Vote):
            item = next(item for item in self.session.run_state.pauses.open if item.call_id == verdict.call_id)
            self.recorder.record("approved", item.call_id, item.tool, item.args_sha256, by=verdict.by, for_=verdict.for_person,
                        via=verdict.via or STRAIGHT_THROUGH_TEMPORAL,
                        comment=verdict.comment, rule=verdict.rule)
            self.session.run_state.events.add("vote", workflow.now(), call_id=item.call_id, by=verdict.by, **door(verdict.via),
                               approvals=list(item.approvals), required_approvals=item.required_approvals)
            self.recorder.publish()
            return {"accepted": True, "call_id": verdict.call_id, "outcome": "awaiting_more_approvals",
                    "approvals": item.approvals, "required_approvals": item.required_approvals}
        self.recorder.record_settlement(verdict, audit_via=STRAIGHT_THROUGH_TEMPORAL)
        if verdict.remember is not None and verdict.run_with is not None:
            self.session.run_state.grants = newest([*self.waiting.live_grants(), grant_from(
                verdict.remember, verdict.tool, args_sha256(verdict.run_with), verdict.by, verdict.call_id, workflow.now(),
                requested_by=verdict.requested_by,
            )], 100)
        return {"accepted": True, "call_id": verdict.call_id, "outcome": verdict.outcome}

    def parse_message(self, payload: Any) -> UserMessage:
        if self.session.state == "closed" or self.session.run_state.cancel_reason is not None:
            raise Refusal("the session is closed", code="conflict")
        if isinstance(payload, str):
            payload = {"text": payload}
        try:
            message = UserMessage.model_validate(payload)
        except ValidationError as error:
            raise Refusal(f"malformed user_message: {describe_validation_error(error)}", code="invalid") from None
        queued = sum(utf8_size(queued.text) for queued in self.session.run_state.inbox) + utf8_size(message.text)
        if queued > MAX_QUEUED_BYTES:
            raise Refusal(f"{len(self.session.run_state.inbox)} messages already wait for the agent; send this one once they are taken in", code="conflict")
        return message

    def check_message(self, payload: Any) -> object:
        """A message as an Update's validator judges it: read and its proof checked, recording nothing."""
        return self.session.run_state.verifier.check_message(self.parse_message(payload), workflow.info().workflow_id,
                                                             workflow.now(), self.run_check(recording=False))

    def receive_message(self, payload: Any) -> dict[str, Any]:
        message, proof = self.session.run_state.verifier.check_message(self.parse_message(payload), workflow.info().workflow_id,
                                                     workflow.now(), self.run_check(recording=True))
        self.session.run_state.verifier.spend(proof, workflow.now())
        self.session.run_state.inbox.append(message.model_copy(update={"proof": None}))
        if message.interrupt and self.session.state == "running":
            self.session.run_state.interrupt_requested = True
        return {"accepted": True, "turn": self.session.run_state.turn, "state": self.session.state,
                "interrupting": self.session.run_state.interrupt_requested, "event": self.session.run_state.events.last_id}

    def parse_cancel(self, payload: Any) -> CancelRequest:
        if self.session.state == "closed" or self.session.run_state.cancel_reason is not None:
            raise Refusal("the session is already closed or closing", code="conflict")
        try:
            return CancelRequest.model_validate(payload if payload is not None else {})
        except ValidationError as error:
            raise Refusal(f"malformed cancel: {describe_validation_error(error)}", code="invalid") from None

    def request_cancel(self, payload: Any) -> dict[str, Any]:
        self.session.run_state.cancel_reason = self.parse_cancel(payload).reason or "no reason given"
        return {"accepted": True, "state": "closing"}

    def signal_or_record(self, signal: str, payload: RawValue, handle: Callable[[Any], Any]) -> None:
        """A signal never fails the workflow: a refused one is recorded and changes nothing."""
        self.checks.history_moved_on()
        value: Any = None
        try:
            value = decoded(payload)
            handle(value)
        except Refusal as refusal:
            self.record_refusal(signal, value, str(refusal))
        except Exception as error:  # the last line of defence: a bug here must not wedge the session
            workflow.logger.exception("signal %s could not be handled", signal)
            self.record_refusal(signal, value, f"internal error: {type(error).__name__}: {error}")

    def record_refusal(self, signal: str, value: Any, reason: str) -> None:
        """What a refusal keeps is clipped: a caller's megabytes never reach status, audit or the next run."""
        reason = clip(reason, RECORDED_BYTES)
        self.session.run_state.ignored_signals = newest(
            [*self.session.run_state.ignored_signals, {"signal": signal, "reason": reason, "at": workflow.now().isoformat()}],
            IGNORED_SIGNALS_KEPT,
        )
        fields = value if isinstance(value, dict) else {}
        self.recorder.record("refused", _recorded(fields.get("call_id")), by=_recorded(fields.get("by")), reason=reason, signal=signal)
        self.session.run_state.events.add("refused", workflow.now(), signal=signal, reason=reason)

    def validate(self, payload: RawValue, check: Callable[[Any], Any]) -> None:
        """An Update's validator: the rejection quotes at most a few hundred bytes of what was sent.
        (`validating` is true only while it runs: see run_check.)"""
        self.session.validating = True
        try:
            self.refuse_while_busy()
            check(decoded(payload))
        except ForwardedToChild:
            return  # the child it is forwarded to judges it
        except ProofRefusal:
            return  # accepted only to be refused by the handler, so that the attempt is audited
        except Refusal as refusal:
            raise refused(clip(str(refusal), RECORDED_BYTES * 4), refusal.code) from None
        except Exception as error:
            raise refused(f"internal error: {type(error).__name__}: {clip(str(error), RECORDED_BYTES)}", "conflict") from None
        finally:
            self.session.validating = False

    def update_or_fail(self, name: str, payload: RawValue, handle: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """Validators refuse most bad Updates before they are recorded; what reaches a handler and
        is refused (a decision without a valid proof, always) is audited like a refused signal."""
        self.checks.history_moved_on()  # accepted: recorded in the history (a validator's refusal is not)
        value: Any = None
        try:
            value = decoded(payload)
            return handle(value)
        except Refusal as refusal:
            self.record_refusal(name, value, str(refusal))
            raise refused(clip(str(refusal), RECORDED_BYTES * 4), refusal.code) from None
        except Exception as error:
            workflow.logger.exception("Update %s could not be handled", name)
            self.record_refusal(name, value, f"internal error: {type(error).__name__}")
            raise refused(f"internal error: {type(error).__name__}", "conflict") from None
