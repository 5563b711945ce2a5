"""AgentWorkflow: a ReAct loop whose pauses for a person are durable.

Reason (a model activity), maybe pause (wait for a person's decision), act
(tool activities), repeat until the model answers; then wait, idle, for the
next message. Temporal records every step, so a pause can last a week and
outlive any number of worker restarts.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Awaitable, Callable, TypeVar

from pydantic import ValidationError
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
    deadline_after,
    parse_decision,
)
from workflows.planning import PlannedCall, plan_call, with_unique_call_ids
from workflows.requests import ModelRequest, ToolInvocation
from workflows.session import (
    DEFAULT_SYSTEM_PROMPT,
    AuditEvent,
    CancelRequest,
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

MODEL_CALL = dict(
    start_to_close_timeout=timedelta(minutes=5),
    heartbeat_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=6,
        non_retryable_error_types=["ModelRequestRejected"],
    ),
)
TOOL_CALL = dict(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=3,
        non_retryable_error_types=["ToolError"],
    ),
)
IGNORED_SIGNALS_KEPT = 50
T = TypeVar("T")


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
        self.inbox: list[UserMessage] = [UserMessage(text=self.config.message, by=self.config.by)]
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
        return SessionSummary(reason=self.closed_reason, turns=self.turn, last_answer=self.last_answer)

    async def next_user_turn(self) -> bool:
        if self.turn:
            self.state = "idle"
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
            if reply is None:
                return
            self.conversation.add_assistant(reply)
            if not reply.tool_calls:
                self.last_answer = reply.content or ""
                return
            await self.act([plan_call(call, self.offered) for call in reply.tool_calls])
            if self.cancel_reason is not None:
                return
            self.take_in_messages()
        self.error = f"stopped after max_steps={self.config.max_steps} without a final answer"

    async def reason(self) -> ModelReply | None:
        """One model call; None when it failed for good or the session was cancelled."""
        self.steps += 1
        self.total_steps += 1
        request = ModelRequest(
            messages=[ChatMessage(role="system", content=self.system_prompt()), *self.conversation.messages],
            tools=[spec.openai_schema() for spec in self.offered.values()],
            model=self.config.model,
        )
        try:
            reply = await self.unless_cancelled(
                lambda: workflow.execute_activity("call_model", request, result_type=ModelReply, **MODEL_CALL)
            )
        except ActivityError as error:
            self.error = f"model call failed: {failure_message(error)}"
            return None
        if reply is None:
            return None
        return with_unique_call_ids(reply, self.conversation.used_call_ids(), self.total_steps)

    async def act(self, plans: list[PlannedCall]) -> None:
        """Settle every call of one step, then add one result per call, in order."""
        for plan in plans:
            if plan.action in ("approve", "ask"):
                self.request_person(plan)
        await self.wait_for_people()
        results = await asyncio.gather(*(self.outcome_of(plan) for plan in plans))
        for plan, result in zip(plans, results):
            self.conversation.add_tool_result(plan.call_id, result)

    async def outcome_of(self, plan: PlannedCall) -> str:
        if plan.action == "refuse":
            return plan.refusal or "Error: refused"
        if plan.action == "run":
            if self.cancel_reason is not None:
                return self.cancelled_result()
            return await self.run_tool(plan.call_id, plan.tool, plan.args)
        settlement = self.pauses.collect(plan.call_id)
        if settlement.run_with is None:
            return settlement.result or ""
        output = await self.run_tool(plan.call_id, plan.tool, settlement.run_with)
        return f"{settlement.note}\n\n{output}" if settlement.note else output

    async def run_tool(self, call_id: str, tool: str, args: dict[str, Any]) -> str:
        invocation = ToolInvocation(session_id=workflow.info().workflow_id, call_id=call_id, tool=tool, args=args)
        try:
            return await workflow.execute_activity("run_tool", invocation, result_type=str, **TOOL_CALL)
        except ActivityError as error:
            return f"Error: {tool} failed: {failure_message(error)}"

    def take_in_messages(self) -> None:
        """Steering: messages that arrived mid-turn join at this step boundary."""
        for message in self.inbox:
            self.conversation.add_user(message.text)
        self.inbox.clear()

    # ------------------------------------------------------------- the pauses

    def request_person(self, plan: PlannedCall) -> None:
        kind: PauseKind = "question" if plan.action == "ask" else "approval"
        now = workflow.now()
        item = PendingCall(
            call_id=plan.call_id,
            kind=kind,
            tool=plan.tool,
            args=plan.args,
            requested_at=now,
            deadline=deadline_after(now, self.timeouts()[kind]),
        )
        if kind == "question":
            question = question_of(plan.args)
            item.question = question.question
            item.choices = question.choices
            item.fields = [f.model_dump(exclude_none=True) for f in question.fields] if question.fields else None
        self.pauses.request(item)
        self.record("requested", call_id=item.call_id, tool=item.tool)

    async def wait_for_people(self) -> None:
        """Wait until every pause of this step is settled, one way or another."""
        while self.pauses.is_waiting():
            self.state = "awaiting_human"
            if self.cancel_reason is not None:
                self.settle_all("cancelled", self.cancelled_result())
            elif self.inbox:
                self.settle_all(
                    "moved_on", "The user moved on to a new message without deciding; cancelled. The tool did not run."
                )
            else:
                deadline = self.pauses.next_deadline()
                timeout = (deadline - workflow.now()).total_seconds() if deadline else None
                try:
                    if timeout is None or timeout > 0:
                        await workflow.wait_condition(
                            lambda: not self.pauses.is_waiting() or bool(self.inbox) or self.cancel_reason is not None,
                            timeout=timeout,
                        )
                        continue
                except asyncio.TimeoutError:
                    pass
                for settlement in self.pauses.expire(workflow.now(), self.timeouts()):
                    self.record_settlement(settlement)
        self.state = "running"

    def settle_all(self, outcome: Outcome, result: str) -> None:
        for settlement in self.pauses.settle_all(outcome, result, workflow.now()):
            self.record_settlement(settlement)

    def timeouts(self) -> dict[PauseKind, float]:
        return {
            "approval": self.config.approval_timeout_seconds,
            "question": self.config.answer_timeout_seconds,
            "review": self.config.approval_timeout_seconds,
        }

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

    def decide(self, verb: str, payload: Any) -> Settlement:
        """The one rule book for decisions, shared by signals and Update validators."""
        if self.state == "closed":
            raise Refusal("the session is closed")
        return self.pauses.decide(parse_decision(verb, payload), CATALOG, workflow.now())

    def apply(self, settlement: Settlement) -> dict[str, Any]:
        self.pauses.settle(settlement)
        self.record_settlement(settlement)
        return {"accepted": True, "call_id": settlement.call_id, "outcome": settlement.outcome}

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
        self.record("message", by=message.by)
        return {"accepted": True, "turn": self.turn, "state": self.state}

    def parse_cancel(self, payload: Any) -> CancelRequest:
        if self.state == "closed" or self.cancel_reason is not None:
            raise Refusal("the session is already closed or closing")
        try:
            return CancelRequest.model_validate(payload if payload is not None else {})
        except ValidationError as error:
            raise Refusal(f"malformed cancel: {describe_validation_error(error)}") from None

    def request_cancel(self, payload: Any) -> dict[str, Any]:
        self.cancel_reason = self.parse_cancel(payload).reason or "no reason given"
        self.record("cancel_requested", reason=self.cancel_reason)
        return {"accepted": True, "state": "closing"}

    def signal_or_record(self, signal: str, payload: Any, handle: Callable[[Any], Any]) -> None:
        """A signal never fails the workflow: a refused one is recorded and changes nothing."""
        try:
            handle(payload)
        except Refusal as refusal:
            at = workflow.now()
            self.ignored_signals.append({"signal": signal, "reason": str(refusal), "at": at.isoformat()})
            del self.ignored_signals[:-IGNORED_SIGNALS_KEPT]
            call_id = payload.get("call_id") if isinstance(payload, dict) else None
            self.record("refused", signal=signal, reason=str(refusal), call_id=call_id if isinstance(call_id, str) else None)

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
            "tools": list(self.offered),
            "model": self.config.model,
            "closed_reason": self.closed_reason,
        }

    @workflow.query
    def transcript(self) -> list[dict[str, Any]]:
        return [message.to_openai() for message in self.conversation.messages]

    @workflow.query
    def audit(self) -> list[dict[str, Any]]:
        return [view(event) for event in self.audit_trail]

    # ---------------------------------------------------------------- helpers

    def system_prompt(self) -> str:
        return self.config.system_prompt or DEFAULT_SYSTEM_PROMPT

    def cancelled_result(self) -> str:
        return f"The session was cancelled ({self.cancel_reason}); the tool did not run."

    async def unless_cancelled(self, start: Callable[[], Awaitable[T]]) -> T | None:
        """Run an activity, but stop waiting for it as soon as the session is cancelled."""
        task = asyncio.ensure_future(start())
        await workflow.wait_condition(lambda: task.done() or self.cancel_reason is not None)
        if task.done():
            return task.result()
        task.cancel()
        return None

    def close(self, reason: str) -> None:
        """Settle whatever is still open, so even a closed transcript is well-formed."""
        result = f"The session closed ({reason}) before this call was settled; the tool did not run."
        self.settle_all("cancelled", result)
        self.conversation.settle_unanswered(result)
        self.closed_reason = reason
        self.state = "closed"
        self.record("closed", reason=reason)

    def record_settlement(self, settlement: Settlement) -> None:
        self.record(
            settlement.outcome, call_id=settlement.call_id, tool=settlement.tool, by=settlement.by,
            reason=settlement.result if settlement.run_with is None else settlement.note,
        )

    def record(self, event: str, **details: Any) -> None:
        self.audit_trail.append(AuditEvent(at=workflow.now(), event=event, **details))


def failure_message(error: ActivityError) -> str:
    cause = error.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return getattr(cause, "message", None) or str(cause or error)
