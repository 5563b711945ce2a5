"""AgentWorkflow: a ReAct loop whose pauses for a person are durable.

Reason (a model activity), maybe pause (wait for a person's decision), act
(tool activities), maybe pause again (review a result), repeat until the
model answers; then wait, idle, for the next message. Temporal records every
step, so a pause can last a week and outlive any number of worker restarts.

Nothing a caller sends may fail a workflow task: every signal and Update
payload is decoded under our control (workflows/inbound.py), and whatever is
wrong with it becomes a recorded refusal. Nothing may end a session either:
long sessions continue as new (workflows/continuing.py) with the one RunState
they carry (workflows/handover.py), and the model activity reads the
conversation through a query instead of receiving it, so each step adds only
what is new to the history.

This class holds the Temporal handlers and the loop; the rest is its parts, plain
objects built in `build_parts`, each given the run's state (workflows/session_run.py)
and the parts it calls: what callers send, decided (inbound.py), a run's start
(starting.py), the verdict on each call (judging.py), pauses and their clocks
(waiting.py) and notices (notices.py), sub-agents (delegating.py, child_reports.py),
continue-as-new (continuing.py), the end (closing.py), the queries (views.py), and
the one recorder of audit, events, logs and visibility (recorder.py). Each decision
verb's signal, Update and validator come from one table (handlers.py).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Awaitable

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.activity_calls import (
    MODEL_CALL, TOOL_CALL, LocalChecks, UnreadableResult, failure_message, read_reply, read_result,
)
from workflows.child_reports import ChildReports
from workflows.closing import Closing
from workflows.continuing import Continuing
from workflows.contract import (
    AUDIT, AUDIT_PAGE, CALL_MODEL, CHILD_PAUSES, EVENTS, MODEL_CONTEXT, PENDING, RUN_TOOL, STATUS, TRANSCRIPT,
    TRANSCRIPT_PAGE, WAIT_UNTIL_SETTLED, WORKFLOW, PageRequest, SessionStatus,
)
from workflows.conversation import ChatMessage, ModelReply
from workflows.decisions import Refusal
from workflows.delegating import ChildPausesTable, Delegating
from workflows.events import EventLog, EventsRequest
from workflows.handlers import with_verb_handlers
from workflows.handover import CALL_IDS_KEPT, RunState, Step, newest
from workflows.identity import Verifier
from workflows.inbound import Inbound
from workflows.judging import Judging
from workflows.limits import RECORDED_BYTES, clip
from workflows.notices import Notices
from workflows.patches import Behaviours
from workflows.payloads import decoded, refused
from workflows.planning import PlannedCall, plan_reply, with_unique_call_ids
from workflows.policy import MORE_TOOLS
from workflows.recorder import Recorder
from workflows.requests import ConversationRef, ModelRequest, ToolInvocation
from workflows.server_questions import asked_input
from workflows.session import SessionSummary, UserMessage
from workflows.session_run import SessionRun
from workflows.starting import Starting, read_input
from workflows.tool_input import ToolInput
from workflows.views import Views
from workflows.waiting import Waiting

with workflow.unsafe.imports_passed_through():
    # The catalog holds tool schemas and approval policies; passed through so
    # the workflow sees the tools the worker registered, not a fresh copy.
    from hitl.catalog import CATALOG

RESULTS_KEPT = 50
# Temporal admits 10 Updates in flight per workflow; waiters beyond this many answer the oldest
# at once, so callers that wait for ever (an `after_event` nobody reaches) leave room for decisions.
MAX_WAITERS = 4


class ToolOutcome(BaseModel):
    text: str
    ran: bool = False


@workflow.defn(name=WORKFLOW)
@with_verb_handlers  # each decision verb's signal, Update and validator, from one table (workflows/handlers.py)
class AgentWorkflow:
    @workflow.init
    def __init__(self, request: RawValue = None) -> None:  # type: ignore[assignment]  # none sent: refused below
        config, carried, setup_error = read_input(request)
        # The first message's `by` is the start input's: on a verified session it counts as proven
        # only with the API's start proof (learn_environment). The speaker's, likewise. A child's
        # first request is whoever asked its parent for the task (workflows/agents.py, Delegation).
        delegated = config.delegated
        asked_by = delegated.requester(config.by) if delegated else config.by
        self.session = SessionRun(
            config=config, setup_error=setup_error,
            # Used to plan replies recorded before the catalog's verdict was (workflows/planning.py).
            offered={spec.name: spec for spec in CATALOG.select(config.tools)},
            # All that outlives this run: continue-as-new hands it over whole (workflows/handover.py).
            run_state=RunState(messages=[], turn=0, total_steps=0, events=EventLog(),
                               inbox=[UserMessage(text=config.message, by=asked_by)],
                               first_message_asserted=True, verifier=Verifier(required=config.verified_decisions)),
        )
        self.build_parts()
        if carried is not None:
            self.continuing.resume(carried)

    def build_parts(self) -> None:
        """The parts, each given the run's state and the parts it calls (none reaches another through
        the workflow): built before any handler runs, since the first task may carry signals."""
        session = self.session
        self.checks = LocalChecks()
        self.reports = ChildReports(session)
        self.notices = Notices(session, self.checks)
        self.recorder = Recorder(session, self.notices, self.reports)
        self.continuing = Continuing(session, self.checks)
        self.waiting = Waiting(session, self.checks, self.recorder, self.notices, self.continuing)
        self.closing = Closing(session, self.waiting, self.recorder)
        self.children = ChildPausesTable(session, self.checks, self.recorder, self.reports)
        self.delegating = Delegating(session, self.checks, self.closing, self.children)
        self.starting = Starting(session, self.checks, self.recorder, self.delegating)
        self.judging = Judging(session, self.checks, self.delegating)
        self.tool_input = ToolInput(session, self.waiting)
        self.views = Views(session, self.waiting, self.delegating, self.reports)
        self.inbound = Inbound(session, self.checks, self.recorder, self.waiting, self.children)

    # ------------------------------------------------------------- handlers and queries

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
        session = self.session
        session.waiters_seen += 1
        waiter = session.waiters_seen
        session.waiters.append(waiter)
        if len(session.waiters) > MAX_WAITERS:
            session.waiters.pop(0)  # the oldest answers now, with the session as it is
        try:
            await workflow.wait_condition(
                lambda: (session.state != "running" and session.settled_event > after and not self.next_turn_is_queued())
                or session.handing_over or waiter not in session.waiters
            )
        finally:
            if waiter in session.waiters:
                session.waiters.remove(waiter)
        return {"status": self.views.status(), "pending": self.views.pending(), "event": session.run_state.events.last_id}

    def next_turn_is_queued(self) -> bool:
        """Idle with a message waiting: its turn starts as soon as the loop runs (next_user_turn)."""
        session = self.session
        return session.behaviours.settles_after_queued_messages and session.state == "idle" and bool(session.run_state.inbox)

    @wait_until_settled.validator
    def check_wait(self, payload: RawValue) -> None:
        """Any payload waits (a malformed one from the first turn); only a busy run refuses (refuse_while_busy)."""
        try:
            self.inbound.refuse_while_busy()
        except Refusal as refusal:
            raise refused(str(refusal), refusal.code) from None

    @workflow.signal(name=CHILD_PAUSES.name)
    def child_pauses(self, payload: RawValue) -> None:
        self.children.take_report(payload)

    @workflow.query(name=PENDING.name)
    def pending(self) -> list[dict[str, Any]]:
        return self.views.pending()

    @workflow.query(name=STATUS.name)
    def status(self) -> SessionStatus:
        return self.views.status()

    @workflow.query(name=TRANSCRIPT.name)
    def transcript(self) -> list[dict[str, Any]]:
        return self.views.transcript()

    @workflow.query(name=TRANSCRIPT_PAGE.name)
    def transcript_page(self, request: PageRequest | None = None) -> dict[str, Any]:
        return self.views.transcript_page(request)

    @workflow.query(name=AUDIT.name)
    def audit(self) -> list[dict[str, Any]]:
        return self.views.audit()

    @workflow.query(name=AUDIT_PAGE.name)
    def audit_page(self, request: PageRequest | None = None) -> dict[str, Any]:
        return self.views.audit_page(request)

    @workflow.query(name=EVENTS.name)
    def events_after(self, request: EventsRequest | None = None) -> dict[str, Any]:
        return self.views.events_after(request)

    @workflow.query(name=MODEL_CONTEXT.name)
    def model_context(self, reference: ConversationRef) -> ModelRequest:
        return self.views.model_context(reference)

    # ------------------------------------------------------------------ the loop

    @workflow.run
    async def run(self, request: RawValue = None) -> SessionSummary:  # type: ignore[assignment]
        if self.session.setup_error:
            raise ApplicationError(self.session.setup_error, type="InvalidSessionInput", non_retryable=True)
        self.session.behaviours = Behaviours.at_run_start()  # see workflows/patches.py
        self.session.run_state.verifier.bound = True
        await self.starting.check_start()
        try:
            if self.session.run_state.in_turn:  # this run continues a turn the previous run was in
                await self.guarded(self.run_turn(resumed=True))
            while await self.next_user_turn():
                await self.guarded(self.run_turn())
        except asyncio.CancelledError:
            self.closing.close("cancelled through Temporal")
            raise
        await self.closing.let_in_flight_work_finish()
        return SessionSummary(reason=self.session.closed_reason or "closed", turns=self.session.run_state.turn,
                              last_answer=self.session.run_state.last_answer)

    async def next_user_turn(self) -> bool:
        if self.delegating.answered_its_task():  # a child session answers one task
            return False
        if self.session.run_state.turn:
            self.recorder.set_state("idle")
        if self.session.run_state.idle_until is None:
            self.session.run_state.idle_until = workflow.now() + timedelta(seconds=self.session.config.idle_timeout_seconds)
        if self.continuing.history_is_long():
            # Between turns nothing is in flight: the session starts a fresh run with what it carries.
            await self.continuing.hand_over()
        while True:
            # Waited on even when a message is already here: the timer's sequence number
            # is part of the recorded history that paused sessions replay.
            try:
                await workflow.wait_condition(
                    lambda: bool(self.session.run_state.inbox) or self.session.run_state.cancel_reason is not None
                    or self.continuing.should_hand_over(),
                    timeout=max(timedelta(0), self.session.run_state.idle_until - workflow.now()),
                )
            except asyncio.TimeoutError:
                self.checks.history_moved_on()  # the timer fired
                self.closing.close(f"idle for {self.session.config.idle_timeout_seconds:g} seconds")
                return False
            if self.session.run_state.inbox or self.session.run_state.cancel_reason is not None:
                break
            await self.continuing.hand_over()
        self.session.run_state.idle_until = None
        if self.session.run_state.cancel_reason is not None:
            self.closing.close(f"cancelled: {self.session.run_state.cancel_reason}")
            return False
        return True

    async def run_turn(self, resumed: bool = False) -> None:
        if not resumed:
            self.session.run_state.turn += 1
            self.session.run_state.steps = 0
            self.session.run_state.error = None
            self.session.run_state.results_this_turn = []
            self.take_in_messages()
        self.session.run_state.in_turn = True
        self.recorder.set_state("running")
        if self.session.run_state.step is not None:  # the previous run handed over in the middle of a step
            await self.finish_step()
            self.take_in_messages()
        while self.session.run_state.cancel_reason is None:
            if self.session.run_state.steps >= self.session.config.max_steps:
                self.session.run_state.error = f"stopped after max_steps={self.session.config.max_steps} without a final answer"
                break
            await self.continuing.hand_over_if_long()
            reply = await self.reason()
            if self.session.run_state.cancel_reason is not None:
                break
            if reply is None:
                if self.session.run_state.interrupt_requested:  # re-plan with the message that interrupted
                    self.take_in_messages()
                    continue
                break
            self.session.append(self.session.conversation.assistant_message(reply))
            self.session.run_state.authors_of_reply, self.session.run_state.authors_since_reply = self.session.run_state.authors_since_reply, []
            workflow.logger.info("step", extra={"session": workflow.info().workflow_id, "turn": self.session.run_state.turn,
                                                "step": self.session.run_state.steps, "tools": [c.name for c in reply.tool_calls]})
            if not reply.tool_calls:
                self.session.run_state.last_answer = reply.content or ""
                self.session.run_state.events.add("answer", workflow.now(), text=self.session.run_state.last_answer)
                break
            reply = await self.judging.judge_by_worker(reply)
            self.session.run_state.step = Step(plans=plan_reply(reply, self.session.offered, self.session.config))
            for plan in self.session.run_state.step.plans:
                self.waiting.open_pause_if_needed(plan)
            await self.finish_step()
            if self.session.run_state.cancel_reason is not None:
                break
            self.take_in_messages()
        self.session.run_state.in_turn = False

    async def guarded(self, turn: Awaitable[None]) -> None:
        """The last line of defence: a bug in the loop's bookkeeping ends the turn with an
        error the person can read, never a workflow task that fails on every retry."""
        try:
            await turn
        except Exception as error:
            if isinstance(error, workflow.NondeterminismError):
                raise
            workflow.logger.exception("the turn stopped on an internal error")
            problem = clip(f"{type(error).__name__}: {error}", RECORDED_BYTES)
            self.session.run_state.error = f"the turn stopped on an internal error: {problem}"
            why = "The turn stopped on an internal error before this call was settled"
            self.waiting.settle_all("cancelled", why)
            self.session.run_state.step = None
            for call_id in self.session.conversation.unanswered_call_ids():
                self.session.add_tool_result(call_id, f"{why}.")
            self.session.run_state.in_turn = False

    async def reason(self) -> ModelReply | None:
        """One model call; None when it failed for good or was cancelled or interrupted.

        The activity gets a reference to the conversation, not the conversation:
        it reads the messages through the `model_context` query, so the history
        records each message once however many steps follow.
        """
        self.session.run_state.steps += 1
        self.session.run_state.total_steps += 1
        info = workflow.info()
        count = len(self.session.conversation.messages)
        # No worker has seen this run's conversation yet: when small, it rides with the reference.
        carried = self.session.behaviours.carries_opening and not self.session.model_called
        reference = ConversationRef(
            session_id=info.workflow_id, run_id=info.run_id, message_count=count,
            prefix_sha256=self.session.chain[-1] if self.session.chain else "", model=self.session.config.model,
            opening=self.views.opening(count) if carried else None,
        )
        self.session.model_called = True
        call = asyncio.ensure_future(
            workflow.execute_activity(
                CALL_MODEL.name, reference, result_type=RawValue,  # read below: see read_result
                summary=f"model, turn {self.session.run_state.turn} step {self.session.run_state.steps}", **MODEL_CALL,
            )
        )
        # A cancel or an interrupting message stops the wait at once; the
        # heartbeating activity hears of its cancellation on its next beat.
        await workflow.wait_condition(
            lambda: call.done() or self.session.run_state.cancel_reason is not None or self.session.run_state.interrupt_requested
        )
        if not call.done():
            call.cancel()
            call.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved: not an error
            return None
        self.checks.history_moved_on()  # the activity's outcome
        try:
            reply = read_reply(call.result())
        except ActivityError as error:
            self.session.run_state.error = f"model call failed: {failure_message(error)}"
            return None
        except UnreadableResult as error:
            self.session.run_state.error = f"model call failed: its result could not be read ({error})"
            return None
        used = self.session.run_state.used_call_ids
        reply = with_unique_call_ids(reply, set(used) | self.session.conversation.used_call_ids(), self.session.run_state.total_steps)
        self.session.run_state.used_call_ids = newest([*used, *(call.id for call in reply.tool_calls)], CALL_IDS_KEPT)
        return reply

    async def finish_step(self) -> None:
        """Settle every call of the step: wait for decisions, run what may run, wait for reviews.

        Each result joins the conversation as soon as it is final (results may
        come in any order after their calls), so a hand-over mid-step carries
        only what still waits.
        """
        step = self.session.run_state.step
        assert step is not None
        if not step.ran:
            await self.waiting.wait_for_people()
            outcomes = await asyncio.gather(*(self.outcome_of(plan) for plan in step.plans))
            for plan, outcome in zip(step.plans, outcomes):
                if plan.review and outcome.ran:
                    self.waiting.request_person("review", plan, result=outcome.text)
                else:
                    self.session.add_tool_result(plan.call_id, outcome.text)
            step.ran = True
        await self.waiting.wait_for_people()
        for plan in step.plans:
            if plan.call_id in self.session.run_state.pauses.settled:
                self.session.add_tool_result(plan.call_id, self.session.run_state.pauses.collect(plan.call_id).result or "")
        self.session.run_state.step = None

    async def outcome_of(self, plan: PlannedCall) -> ToolOutcome:
        cancelled = f"The session was cancelled ({self.session.run_state.cancel_reason}); the tool did not run."
        if plan.action == "refuse":
            return ToolOutcome(text=plan.refusal or "Error: refused")
        if plan.action == "run":
            if self.session.run_state.cancel_reason is not None:
                return ToolOutcome(text=cancelled)
            return await self.run_tool(plan.call_id, plan.tool, plan.args)
        settlement = self.session.run_state.pauses.collect(plan.call_id)
        if settlement.run_with is None:
            return ToolOutcome(text=settlement.result or "")
        if self.session.run_state.cancel_reason is not None:  # approved, then cancelled before it started: it does not run
            return ToolOutcome(text=cancelled)
        outcome = await self.run_tool(plan.call_id, plan.tool, settlement.run_with)
        if settlement.note:
            outcome.text = f"{settlement.note}\n\n{outcome.text}"
        return outcome

    async def run_tool(self, call_id: str, tool: str, args: dict[str, Any],
                       answered: dict[str, Any] | None = None) -> ToolOutcome:
        if tool in self.delegating.delegates():  # an agent's answer, from a child session: output like a tool's
            text = await self.delegating.delegate(tool, args)
            self.output_entered(tool, call_id)
            return ToolOutcome(text=text, ran=not text.startswith("Error:"))
        invocation = ToolInvocation(session_id=workflow.info().workflow_id, call_id=call_id, tool=tool, args=args,
                                    input=answered)
        try:
            output = read_result(await self.checks.activity_outcome(workflow.execute_activity(
                RUN_TOOL.name, invocation, result_type=RawValue, summary=f"{tool} ({call_id})", **TOOL_CALL
            )), RUN_TOOL.result)
        except ActivityError as error:
            asked = asked_input(error)  # its MCP server asks a person first (workflows/tool_input.py)
            if asked is not None:
                retry, refused = (await self.tool_input.answer_tool_input(call_id, tool, args, asked, (answered or {}).get("round", 0) + 1)
                                  if not isinstance(asked, str) else (None, f"Error: {tool} failed: {asked}"))
                if retry is not None:
                    return await self.run_tool(call_id, tool, args, retry)
                self.output_entered(tool, call_id)
                return ToolOutcome(text=refused or "")
            # An error's text is the tool's (an MCP server's isError result, an exception's message):
            # it enters the conversation like a result, so it counts as the tool's output too.
            self.output_entered(tool, call_id)
            return ToolOutcome(text=f"Error: {tool} failed: {failure_message(error)}")
        except UnreadableResult as error:
            self.output_entered(tool, call_id)
            return ToolOutcome(text=f"Error: {tool} failed: its result could not be read ({error})")
        self.output_entered(tool, call_id)
        return ToolOutcome(text=output, ran=True)

    def output_entered(self, tool: str, call_id: str) -> None:
        """The first output of each tool in the turn, for the policy's untrusted_output. Past
        RESULTS_KEPT tools, one entry says more came (the judgement counts it as untrusted), so no
        number of harmless calls can push an untrusted one out."""
        turn = self.session.run_state.results_this_turn
        if any(seen in (tool, MORE_TOOLS) for seen, _ in turn):
            return
        self.session.run_state.results_this_turn = [*turn, (tool, call_id) if len(turn) < RESULTS_KEPT else (MORE_TOOLS, call_id)]

    def take_in_messages(self) -> None:
        """Steering: messages that arrived mid-turn join at this step boundary."""
        first_asserted = self.session.run_state.first_message_asserted
        for index, message in enumerate(self.session.run_state.inbox):
            self.session.append(ChatMessage(role="user", content=message.text))
            self.session.run_state.speaker = message.by
            self.session.run_state.speaker_asserted = index == 0 and bool(first_asserted)
            if message.by not in self.session.run_state.authors_since_reply:
                self.session.run_state.authors_since_reply.append(message.by)
            self.session.run_state.events.add("message", workflow.now(), text=message.text, by=message.by)
        self.session.run_state.inbox.clear()
        self.session.run_state.first_message_asserted = None
        self.session.run_state.interrupt_requested = False
