"""AgentWorkflow: a ReAct loop whose pauses for a person are durable.

Reason (a model activity), maybe pause (wait for a person's decision), act
(tool activities), maybe pause again (review a result), repeat until the
model answers; then wait, idle, for the next message. Temporal records every
step, so a pause can last a week and outlive any number of worker restarts.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Callable

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.conversation import ChatMessage, Conversation, ModelReply
from workflows.forms import describe_validation_error
from workflows.pauses import (
    Outcome,
    PauseKind,
    Pauses,
    PendingCall,
    Refusal,
    Settlement,
    Verdict,
    Vote,
    deadline_after,
    parse_decision,
)
from workflows.planning import PlannedCall, plan_call, with_unique_call_ids
from workflows.requests import ModelRequest, Notification, ToolInvocation
from workflows.rules import Grant, args_sha256, grant_from
from workflows.session import (
    DEFAULT_SYSTEM_PROMPT,
    AuditEvent,
    CancelRequest,
    CarriedState,
    SessionInput,
    SessionState,
    SessionSummary,
    UserMessage,
    view,
)

with workflow.unsafe.imports_passed_through():
    # The catalog holds tool schemas and approval policies; passed through so
    # the workflow sees the tools the worker registered, not a fresh copy.
    from activities.tools import CATALOG
    from activities.tools.builtin import question_of

# No attempt limit: a worker that dies mid-call is retried for as long as it
# takes. The activities count their own failures and make them final (see
# activities/model.py), so a broken tool or provider still ends the call.
MODEL_CALL = dict(
    start_to_close_timeout=timedelta(minutes=5),
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        non_retryable_error_types=["ModelRequestRejected"],
    ),
)
TOOL_CALL = dict(
    start_to_close_timeout=timedelta(minutes=2),
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        non_retryable_error_types=["ToolError"],
    ),
)
NOTIFY_CALL = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(minutes=1)),
)
IGNORED_SIGNALS_KEPT = 50
CARRY_BUDGET = 1_000_000  # characters of conversation taken through continue-as-new
AUDIT_CARRIED = 5_000  # audit events taken through continue-as-new, newest first
MODEL_REQUEST_BUDGET = 300_000  # characters per model call: about a 100k-token context, far under 2 MB
AUDIT_EVENT: dict[Outcome, str] = {
    "approved": "approved", "edited": "edited", "rejected": "rejected", "declined": "rejected",
    "answered": "answered", "timed_out": "timed_out", "moved_on": "cancelled", "cancelled": "cancelled",
}


class ToolOutcome(BaseModel):
    text: str
    ran: bool = False


@workflow.defn
class AgentWorkflow:
    @workflow.init
    def __init__(self, request: Any) -> None:
        self.setup_error: str | None = None
        try:
            self.config = SessionInput.model_validate(request)
        except ValidationError as error:
            self.setup_error = f"invalid session input: {describe_validation_error(error)}"
            self.config = SessionInput(message="(invalid input)")
        self.offered = {spec.name: spec for spec in CATALOG.select(self.config.tools)}
        self.conversation = Conversation()
        self.pauses = Pauses()
        self.grants: list[Grant] = []
        self.inbox: list[UserMessage] = [UserMessage(text=self.config.message, by=self.config.by)]
        self.speaker: str | None = None
        self.interrupt_requested = False
        self.cancel_reason: str | None = None
        self.state: SessionState = "running"
        self.turn = 0
        self.steps = 0
        self.total_steps = 0
        self.last_answer: str | None = None
        self.error: str | None = None
        self.closed_reason: str | None = None
        self.ignored_signals: list[dict[str, Any]] = []
        self.audit_trail: list[AuditEvent] = []
        if self.config.carried is not None:
            self.resume(self.config.carried)

    # ------------------------------------------------------------------ the loop

    @workflow.run
    async def run(self, request: Any) -> SessionSummary:
        if self.setup_error:
            raise ApplicationError(self.setup_error, type="InvalidSessionInput", non_retryable=True)
        try:
            while await self.next_user_turn():
                await self.run_turn()
        except asyncio.CancelledError:
            self.close("cancelled through Temporal")
            raise
        # Let Update handlers that are still replying finish before the run ends.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SessionSummary(reason=self.closed_reason or "closed", turns=self.turn, last_answer=self.last_answer)

    async def next_user_turn(self) -> bool:
        if self.turn:
            self.state = "idle"
        if self.history_is_long():
            # Between turns nothing is in flight: the session starts a fresh run with what it carries.
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(self.config.model_copy(update={"carried": self.carry()}))
        try:
            await workflow.wait_condition(
                lambda: bool(self.inbox) or self.cancel_reason is not None,
                timeout=timedelta(seconds=self.config.idle_timeout_seconds),
            )
        except asyncio.TimeoutError:
            self.close(f"idle for {self.config.idle_timeout_seconds:g} seconds")
            return False
        if self.cancel_reason is not None:
            self.close(f"cancelled: {self.cancel_reason}")
            return False
        return True

    async def run_turn(self) -> None:
        self.turn += 1
        self.steps = 0
        self.error = None
        self.state = "running"
        self.take_in_messages()
        while self.steps < self.config.max_steps:
            reply = await self.reason()
            if self.cancel_reason is not None:
                return
            if reply is None:
                if self.interrupt_requested:  # re-plan with the message that interrupted
                    self.take_in_messages()
                    continue
                return
            self.conversation.add_assistant(reply)
            if not reply.tool_calls:
                self.last_answer = reply.content or ""
                return
            await self.act([plan_call(call, self.offered, self.config) for call in reply.tool_calls])
            if self.cancel_reason is not None:
                return
            self.take_in_messages()
        self.error = f"stopped after max_steps={self.config.max_steps} without a final answer"

    async def reason(self) -> ModelReply | None:
        """One model call; None when it failed for good or was cancelled or interrupted."""
        self.steps += 1
        self.total_steps += 1
        request = ModelRequest(
            messages=[ChatMessage(role="system", content=self.system_prompt()), *self.conversation.within(MODEL_REQUEST_BUDGET)],
            tools=[spec.openai_schema() for spec in self.offered.values()],
            model=self.config.model,
        )
        call = asyncio.ensure_future(
            workflow.execute_activity("call_model", request, result_type=ModelReply, **MODEL_CALL)
        )
        # A cancel or an interrupting message stops the wait at once; the
        # heartbeating activity hears of its cancellation on its next beat.
        await workflow.wait_condition(
            lambda: call.done() or self.cancel_reason is not None or self.interrupt_requested
        )
        if not call.done():
            call.cancel()
            call.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved: not an error
            return None
        try:
            reply = call.result()
        except ActivityError as error:
            self.error = f"model call failed: {failure_message(error)}"
            return None
        return with_unique_call_ids(reply, self.conversation.used_call_ids(), self.total_steps)

    async def act(self, plans: list[PlannedCall]) -> None:
        """Settle every call of one step, then add one result per call, in order."""
        for plan in plans:
            self.open_pause_if_needed(plan)
        await self.wait_for_people()
        outcomes = await asyncio.gather(*(self.outcome_of(plan) for plan in plans))
        reviewed = set()
        for plan, outcome in zip(plans, outcomes):
            if plan.review and outcome.ran:
                self.request_person("review", plan, result=outcome.text)
                reviewed.add(plan.call_id)
        await self.wait_for_people()
        for plan, outcome in zip(plans, outcomes):
            if plan.call_id in reviewed:
                outcome.text = self.pauses.collect(plan.call_id).result or ""
            self.conversation.add_tool_result(plan.call_id, outcome.text)

    def open_pause_if_needed(self, plan: PlannedCall) -> None:
        if plan.action == "ask":
            self.request_person("question", plan)
        elif plan.action == "approve":
            grant = self.grant_for(plan)
            if grant is None:
                self.request_person("approval", plan)
            else:
                plan.action = "run"
                self.record("auto_approved", plan.call_id, plan.tool, args_sha256(plan.args), by=grant.by, rule=grant.describe())
        elif plan.action == "run" and plan.policy:
            self.record("auto_approved", plan.call_id, plan.tool, args_sha256(plan.args), rule=plan.policy)

    async def outcome_of(self, plan: PlannedCall) -> ToolOutcome:
        if plan.action == "refuse":
            return ToolOutcome(text=plan.refusal or "Error: refused")
        if plan.action == "run":
            if self.cancel_reason is not None:
                return ToolOutcome(text=f"The session was cancelled ({self.cancel_reason}); the tool did not run.")
            return await self.run_tool(plan.call_id, plan.tool, plan.args)
        settlement = self.pauses.collect(plan.call_id)
        if settlement.run_with is None:
            return ToolOutcome(text=settlement.result or "")
        outcome = await self.run_tool(plan.call_id, plan.tool, settlement.run_with)
        if settlement.note:
            outcome.text = f"{settlement.note}\n\n{outcome.text}"
        return outcome

    async def run_tool(self, call_id: str, tool: str, args: dict[str, Any]) -> ToolOutcome:
        invocation = ToolInvocation(session_id=workflow.info().workflow_id, call_id=call_id, tool=tool, args=args)
        try:
            output = await workflow.execute_activity("run_tool", invocation, result_type=str, **TOOL_CALL)
        except ActivityError as error:
            return ToolOutcome(text=f"Error: {tool} failed: {failure_message(error)}")
        return ToolOutcome(text=output, ran=True)

    def take_in_messages(self) -> None:
        """Steering: messages that arrived mid-turn join at this step boundary."""
        for message in self.inbox:
            self.conversation.add_user(message.text)
            self.speaker = message.by
        self.inbox.clear()
        self.interrupt_requested = False

    def history_is_long(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= self.config.continue_as_new_after_events

    def carry(self) -> CarriedState:
        return CarriedState(
            messages=self.conversation.within(CARRY_BUDGET), inbox=self.inbox, grants=self.grants,
            audit=self.audit_trail[-AUDIT_CARRIED:], ignored_signals=self.ignored_signals, turn=self.turn,
            total_steps=self.total_steps, last_answer=self.last_answer, speaker=self.speaker,
        )

    def resume(self, carried: CarriedState) -> None:
        self.conversation = Conversation(messages=carried.messages)
        self.inbox = list(carried.inbox)
        self.grants = list(carried.grants)
        self.audit_trail = list(carried.audit)
        self.ignored_signals = list(carried.ignored_signals)
        self.turn, self.total_steps = carried.turn, carried.total_steps
        self.last_answer, self.speaker = carried.last_answer, carried.speaker
        self.state = "idle" if not self.inbox else "running"

    # ------------------------------------------------------------- the pauses

    def request_person(self, kind: PauseKind, plan: PlannedCall, result: str | None = None) -> None:
        rules, now = self.config, workflow.now()
        decided_by_approvers = kind != "question"
        item = PendingCall(
            call_id=plan.call_id,
            kind=kind,
            tool=plan.tool,
            args=plan.args,
            args_sha256=args_sha256(plan.args),
            result=result,
            requested_at=now,
            deadline=deadline_after(now, self.timeouts()[kind]),
            requested_by=self.speaker,
            approvers=rules.approvers_for(plan.tool) if decided_by_approvers else None,
            required_approvals=rules.approvals_needed(plan.tool) if kind == "approval" else 1,
            four_eyes=rules.four_eyes and decided_by_approvers,
            remind_at=deadline_after(now, rules.remind_after_seconds),
            escalate_at=deadline_after(now, rules.escalate_after_seconds) if decided_by_approvers else None,
        )
        if kind == "question":
            question = question_of(plan.args)
            item.question = question.question
            item.choices = question.choices
            item.fields = [f.model_dump(exclude_none=True) for f in question.fields] if question.fields else None
        self.pauses.request(item)
        self.record("requested", item.call_id, item.tool, item.args_sha256, by=self.speaker, rule=kind)
        self.notify("requested", item)

    async def wait_for_people(self) -> None:
        """Wait until every open pause is settled: by a person, a message, a cancel or the clock."""
        while self.pauses.is_waiting():
            self.state = "awaiting_human"
            if self.cancel_reason is not None:
                self.settle_all("cancelled", f"The session was cancelled ({self.cancel_reason})")
            elif self.inbox:
                self.settle_all("moved_on", "The user moved on to a new message without deciding")
            else:
                next_event = self.pauses.next_event()
                timeout = (next_event - workflow.now()).total_seconds() if next_event else None
                try:
                    if timeout is None or timeout > 0:
                        await workflow.wait_condition(
                            lambda: not self.pauses.is_waiting() or bool(self.inbox) or self.cancel_reason is not None,
                            timeout=timeout,
                        )
                        continue
                except asyncio.TimeoutError:
                    pass
                self.on_the_clock()
        self.state = "running"

    def on_the_clock(self) -> None:
        """Deadlines, escalations and reminders that have come due; the timeout comes last."""
        now = workflow.now()
        for item in self.pauses.due(now):
            if item.deadline is not None and item.deadline <= now:
                self.record_settlement(self.pauses.expire(item, self.timeouts()[item.kind], now))
                continue
            if item.escalate_at is not None and item.escalate_at <= now:
                item.escalate_at = None
                if item.approvers is not None:
                    item.approvers = list(dict.fromkeys([*item.approvers, *self.config.escalate_to]))
                self.notify("escalated", item, to=self.config.escalate_to)
            if item.remind_at is not None and item.remind_at <= now:
                item.remind_at = deadline_after(now, self.config.remind_after_seconds)
                self.notify("reminder", item)

    def settle_all(self, outcome: Outcome, why: str) -> None:
        for settlement in self.pauses.settle_all(outcome, why, workflow.now()):
            self.record_settlement(settlement)

    def grant_for(self, plan: PlannedCall) -> Grant | None:
        sha, now = args_sha256(plan.args), workflow.now()
        return next((grant for grant in self.grants if grant.covers(plan.tool, sha, now)), None)

    def timeouts(self) -> dict[PauseKind, float]:
        return {
            "approval": self.config.approval_timeout_seconds,
            "question": self.config.answer_timeout_seconds,
            "review": self.config.approval_timeout_seconds,
        }

    def notify(self, event: str, item: PendingCall, to: list[str] | None = None) -> None:
        """Tell people a pause needs them; a failed notification never blocks the session."""
        notification = Notification(
            session_id=workflow.info().workflow_id, event=event, item=item.view(),
            to=to or item.approvers or [], at=workflow.now(),
        )

        async def send() -> None:
            try:
                await workflow.execute_activity("notify", notification, **NOTIFY_CALL)
            except ActivityError as error:
                workflow.logger.warning("notification failed: %s", failure_message(error))

        asyncio.ensure_future(send())

    # ----------------------------------------------------- signals and Updates

    @workflow.signal
    def user_message(self, payload: Any = None) -> None:
        self.signal_or_record("user_message", payload, self.receive_message)

    @workflow.update
    def user_message_update(self, payload: Any = None) -> dict[str, Any]:
        return self.update_or_fail(payload, self.receive_message)

    @user_message_update.validator
    def check_user_message(self, payload: Any = None) -> None:
        self.parse_message(payload)

    @workflow.signal
    def approve(self, payload: Any = None) -> None:
        self.signal_or_record("approve", payload, self.approve_call)

    @workflow.update
    def approve_update(self, payload: Any = None) -> dict[str, Any]:
        return self.update_or_fail(payload, self.approve_call)

    @approve_update.validator
    def check_approve(self, payload: Any = None) -> None:
        self.decide("approve", payload)

    @workflow.signal
    def reject(self, payload: Any = None) -> None:
        self.signal_or_record("reject", payload, self.reject_call)

    @workflow.update
    def reject_update(self, payload: Any = None) -> dict[str, Any]:
        return self.update_or_fail(payload, self.reject_call)

    @reject_update.validator
    def check_reject(self, payload: Any = None) -> None:
        self.decide("reject", payload)

    @workflow.signal
    def answer(self, payload: Any = None) -> None:
        self.signal_or_record("answer", payload, self.answer_call)

    @workflow.update
    def answer_update(self, payload: Any = None) -> dict[str, Any]:
        return self.update_or_fail(payload, self.answer_call)

    @answer_update.validator
    def check_answer(self, payload: Any = None) -> None:
        self.decide("answer", payload)

    @workflow.signal
    def cancel(self, payload: Any = None) -> None:
        self.signal_or_record("cancel", payload, self.request_cancel)

    @workflow.update
    def cancel_update(self, payload: Any = None) -> dict[str, Any]:
        return self.update_or_fail(payload, self.request_cancel)

    @cancel_update.validator
    def check_cancel(self, payload: Any = None) -> None:
        self.parse_cancel(payload)

    def approve_call(self, payload: Any) -> dict[str, Any]:
        return self.apply(self.decide("approve", payload))

    def reject_call(self, payload: Any) -> dict[str, Any]:
        return self.apply(self.decide("reject", payload))

    def answer_call(self, payload: Any) -> dict[str, Any]:
        return self.apply(self.decide("answer", payload))

    def decide(self, verb: str, payload: Any) -> Verdict:
        """The one rule book for decisions, shared by signals and Update validators."""
        if self.state == "closed":
            raise Refusal("the session is closed")
        return self.pauses.decide(parse_decision(verb, payload), CATALOG, workflow.now())

    def apply(self, verdict: Verdict) -> dict[str, Any]:
        self.pauses.apply(verdict)
        if isinstance(verdict, Vote):
            item = next(item for item in self.pauses.open if item.call_id == verdict.call_id)
            self.record("approved", item.call_id, item.tool, item.args_sha256, by=verdict.by,
                        comment=verdict.comment, rule=verdict.rule)
            return {"accepted": True, "call_id": verdict.call_id, "outcome": "awaiting_more_approvals",
                    "approvals": item.approvals, "required_approvals": item.required_approvals}
        self.record_settlement(verdict)
        if verdict.remember is not None and verdict.run_with is not None:
            self.grants.append(grant_from(
                verdict.remember, verdict.tool, args_sha256(verdict.run_with), verdict.by, verdict.call_id, workflow.now()
            ))
        return {"accepted": True, "call_id": verdict.call_id, "outcome": verdict.outcome}

    def parse_message(self, payload: Any) -> UserMessage:
        if self.state == "closed" or self.cancel_reason is not None:
            raise Refusal("the session is closed")
        if isinstance(payload, str):
            payload = {"text": payload}
        try:
            return UserMessage.model_validate(payload)
        except ValidationError as error:
            raise Refusal(f"malformed user_message: {describe_validation_error(error)}") from None

    def receive_message(self, payload: Any) -> dict[str, Any]:
        message = self.parse_message(payload)
        self.inbox.append(message)
        if message.interrupt and self.state == "running":
            self.interrupt_requested = True
        return {"accepted": True, "turn": self.turn, "state": self.state, "interrupting": self.interrupt_requested}

    def parse_cancel(self, payload: Any) -> CancelRequest:
        if self.state == "closed" or self.cancel_reason is not None:
            raise Refusal("the session is already closed or closing")
        try:
            return CancelRequest.model_validate(payload if payload is not None else {})
        except ValidationError as error:
            raise Refusal(f"malformed cancel: {describe_validation_error(error)}") from None

    def request_cancel(self, payload: Any) -> dict[str, Any]:
        self.cancel_reason = self.parse_cancel(payload).reason or "no reason given"
        return {"accepted": True, "state": "closing"}

    def signal_or_record(self, signal: str, payload: Any, handle: Callable[[Any], Any]) -> None:
        """A signal never fails the workflow: a refused one is recorded and changes nothing."""
        try:
            handle(payload)
        except Refusal as refusal:
            self.ignored_signals.append({"signal": signal, "reason": str(refusal), "at": workflow.now().isoformat()})
            del self.ignored_signals[:-IGNORED_SIGNALS_KEPT]
            fields = payload if isinstance(payload, dict) else {}
            self.record(
                "refused", _text(fields.get("call_id")), by=_text(fields.get("by")), reason=str(refusal), signal=signal
            )

    @staticmethod
    def update_or_fail(payload: Any, handle: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        try:
            return handle(payload)
        except Refusal as refusal:  # the validator normally refuses first; this is a backstop
            raise ApplicationError(str(refusal), type="Refusal", non_retryable=True) from None

    # ---------------------------------------------------------------- queries

    @workflow.query
    def pending(self) -> list[dict[str, Any]]:
        return [item.view() for item in self.pauses.open]

    @workflow.query
    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "turn": self.turn,
            "steps": self.steps,
            "total_steps": self.total_steps,
            "last_answer": self.last_answer,
            "error": self.error,
            "pending": len(self.pauses.open),
            "queued_messages": len(self.inbox),
            "ignored_signals": self.ignored_signals,
            "remembered": [view(grant) for grant in self.grants if grant.until > workflow.now()],
            "tools": list(self.offered),
            "model": self.config.model,
            "closed_reason": self.closed_reason,
        }

    @workflow.query
    def transcript(self) -> list[dict[str, Any]]:
        return [message.to_openai() for message in self.conversation.messages]

    @workflow.query
    def audit(self) -> list[dict[str, Any]]:
        return [event.model_dump(mode="json") for event in self.audit_trail]

    # ---------------------------------------------------------------- helpers

    def system_prompt(self) -> str:
        return self.config.system_prompt or DEFAULT_SYSTEM_PROMPT

    def close(self, reason: str) -> None:
        """Settle whatever is still open, so even a closed transcript is well-formed."""
        why = f"The session closed ({reason}) before this call was settled"
        self.settle_all("cancelled", why)
        self.conversation.settle_unanswered(f"{why}; the tool did not run.")
        self.closed_reason = reason
        self.state = "closed"

    def record_settlement(self, settlement: Settlement) -> None:
        self.record(
            AUDIT_EVENT[settlement.outcome], settlement.call_id, settlement.tool, settlement.args_sha256,
            by=settlement.by, comment=settlement.comment, rule=settlement.rule,
            reason=settlement.result if settlement.outcome not in ("approved", "edited", "answered") else None,
        )

    def record(self, event: str, call_id: str | None = None, tool: str | None = None,
               sha: str | None = None, **details: Any) -> None:
        self.audit_trail.append(
            AuditEvent(at=workflow.now(), event=event, call_id=call_id, tool=tool, args_sha256=sha, **details)
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def failure_message(error: ActivityError) -> str:
    cause = error.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return getattr(cause, "message", None) or str(cause or error)
