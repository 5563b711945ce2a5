"""AgentWorkflow: a ReAct loop whose pauses for a person are durable.

Reason (a model activity), maybe pause (wait for a person's decision), act
(tool activities), maybe pause again (review a result), repeat until the
model answers; then wait, idle, for the next message. Temporal records every
step, so a pause can last a week and outlive any number of worker restarts.

Nothing a caller sends may fail a workflow task: every signal and Update
payload is decoded here, under our control, and whatever is wrong with it
becomes a recorded refusal. Nothing may end a session either: long sessions
continue as new (see workflows/handover.py), and the model activity reads the
conversation through a query instead of receiving it, so each step adds only
what is new to the history.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.arity import TooManyArguments
from workflows.conversation import ChatMessage, Conversation, ModelReply, message_sha256
from workflows.events import EventLog, EventsRequest
from workflows.forms import describe_validation_error
from workflows.identity import ProofRefusal, RunCheck, SpentProof, Verifier
from workflows.handover import (
    AUDIT_CARRIED,
    CALL_IDS_KEPT,
    DECIDED_KEPT,
    HISTORY_BYTES_LIMIT,
    IGNORED_SIGNALS_KEPT,
    CarriedState,
    Step,
    newest,
    shrink_to_fit,
)
from workflows.limits import (
    MAX_ARGUMENT_BYTES,
    MAX_QUEUED_BYTES,
    MODEL_WINDOW_BYTES,
    RECORDED_BYTES,
    clip,
    json_size,
    utf8_size,
)
from workflows.pauses import (
    Claim,
    ClaimVerdict,
    DecisionBase,
    Outcome,
    PauseKind,
    Pauses,
    PendingCall,
    Refusal,
    Release,
    Settlement,
    Verdict,
    Vote,
    deadline_after,
    parse_decision,
)
from workflows.patches import Behaviours
from workflows.policy import MORE_TOOLS
from workflows.planning import PlannedCall, plan_reply, with_recorded_args, with_unique_call_ids
from workflows.requests import (
    ConversationRef,
    FactsRequest,
    Judgement,
    JudgementRequest,
    ModelRequest,
    Notification,
    Pin,
    SessionFacts,
    ToolInvocation,
    VerdictRequest,
)
from workflows.rules import Grant, args_sha256, grant_from
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
from workflows.visibility import Publisher, compact_item

with workflow.unsafe.imports_passed_through():
    # The catalog holds tool schemas and approval policies; passed through so
    # the workflow sees the tools the worker registered, not a fresh copy.
    from catalog import CATALOG, question_of

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
# After a person's cancel the session closes this much later, from its own timer (see
# let_in_flight_work_finish).
CANCEL_GRACE = timedelta(seconds=1)
SESSION_MEMO = "hitl_session"
PINS_KEPT = 500
RESULTS_KEPT = 50
# How long a worker's "run" for a tool whose verdict no argument changes is reused without asking
# the worker again: a changed policy file applies within this long. Each reuse saves a marker.
VERDICT_REUSE = timedelta(seconds=60)
CLAIM_SECONDS_AT_MOST = 3600.0  # a claim keeps others out of a decision: for an hour at most
# Past these the session stops waiting for people rather than be ended by Temporal.
HISTORY_EVENTS_CRITICAL = 45_000
HISTORY_BYTES_CRITICAL = 40_000_000
RULE_FIELDS = {"approvers", "required_approvals", "auto_approve", "require_approval"}
PAGE_BYTES = 1_500_000  # a query answer stays below Temporal's 2 MB
# Temporal admits 10 Updates in flight per workflow; waiters beyond this many answer the oldest
# at once, so callers that wait for ever (an `after_event` nobody reaches) leave room for decisions.
MAX_WAITERS = 4
AUDIT_EVENT: dict[Outcome, str] = {
    "approved": "approved", "edited": "edited", "rejected": "rejected", "declined": "rejected",
    "answered": "answered", "timed_out": "timed_out", "moved_on": "cancelled", "cancelled": "cancelled",
}


class ToolOutcome(BaseModel):
    text: str
    ran: bool = False


class PageRequest(BaseModel):
    """`offset` into the whole transcript (or audit); none for the newest page."""

    offset: int | None = None
    limit: int = 200


@workflow.defn
class AgentWorkflow:
    @workflow.init
    def __init__(self, request: RawValue = None) -> None:  # type: ignore[assignment]  # none sent: refused below
        self.setup_error: str | None = None
        self.config, carried = self.read_input(request)
        # Used to plan replies recorded before the catalog's verdict was (workflows/planning.py).
        self.offered = {spec.name: spec for spec in CATALOG.select(self.config.tools)}
        self.conversation = Conversation()
        self.message_offset = 0  # index in the whole transcript of this run's first message
        self.chain: list[str] = []  # hash chain over this run's messages
        self.pauses = Pauses()
        self.step: Step | None = None
        self.grants: list[Grant] = []
        self.inbox: list[UserMessage] = [UserMessage(text=self.config.message, by=self.config.by)]
        self.speaker: str | None = None
        self.interrupt_requested = False
        self.cancel_reason: str | None = None
        self.state: SessionState = "running"
        self.in_turn = False
        self.turn = 0
        self.steps = 0
        self.total_steps = 0
        self.last_answer: str | None = None
        self.error: str | None = None
        self.closed_reason: str | None = None
        self.ignored_signals: list[dict[str, Any]] = []
        self.audit_trail: list[AuditEvent] = []
        self.audit_offset = 0
        self.used_call_ids: list[str] = []
        self.notifications_in_flight = 0
        self.idle_until: datetime | None = None
        self.hands_over_anywhere = False
        self.hand_over_blocked = False
        self.handing_over = False
        self.settled_event = 0  # the event id at which the session last stopped running
        self.waiters: list[int] = []  # wait_until_settled calls still waiting, oldest first
        self.waiters_seen = 0
        self.event_log = EventLog()
        self.publisher = Publisher()
        self.verifier = Verifier(required=self.config.verified_decisions)
        self.edit_regexes = False  # set in run() for histories recorded before EDITS_WITHOUT_REGEXES
        self.verdicts_locally = True  # likewise, VERDICTS_BY_LOCAL_ACTIVITY
        self.verdicts_cached = True  # likewise, VERDICTS_CACHED_PER_RUN
        # The local activity's verdict (arguments aside) on tools it said run without asking, this run.
        self.judged_auto_run: dict[str, dict[str, Any]] = {}
        self.authorized = True  # likewise, AUTHORIZATION_MODEL
        self.behaviours = Behaviours()
        self.pins: dict[str, Pin] = {}  # tools' definitions as this session first saw them
        self.results_this_turn: list[tuple[str, str]] = []  # (tool, call id) whose output entered this turn
        self.validating = False  # inside an Update's validator, which may command nothing
        self.reusable_runs: dict[str, tuple[dict[str, Any], datetime]] = {}  # tool -> (verdict, judged at)
        # The first message's `by` is the start input's: on a verified session it counts as proven
        # only with the API's start proof (learn_environment). The speaker's, likewise.
        self.first_message = self.inbox[0]
        self.start_asserted = True
        self.speaker_asserted = False
        # Who wrote the messages the model read since its last reply, and those before the reply
        # being planned: a remembered approval covers a call only when its requester alone led to it.
        self.authors_since_reply: list[str | None] = []
        self.authors_of_reply: list[str | None] = []
        if carried is not None:
            self.resume(carried)

    def read_input(self, request: RawValue | None) -> tuple[SessionInput, CarriedState | None]:
        """The start input, or a setup error that fails the session at once with the reason."""
        try:
            config = SessionInput.model_validate(decoded(request))
            problems = config.rule_problems()
            if problems:
                raise Refusal("; ".join(problems))
            if config.carried is None:
                return config, None
            info = workflow.info()
            # Temporal sets continued_run_id on a cron schedule's runs and on retries as well, each
            # with the start input as its caller wrote it: neither is the session handing over.
            if info.continued_run_id is None or info.cron_schedule or info.attempt > 1:
                raise Refusal("carried: only a session's own previous run may set it (continue-as-new), "
                              "not a cron schedule's run or a retry")
            return config, CarriedState.model_validate(config.carried)
        except ValidationError as error:
            self.setup_error = f"invalid session input: {describe_validation_error(error)}"
        except Refusal as refusal:
            self.setup_error = f"invalid session input: {refusal}"
        except Exception as error:  # e.g. JSON nested past any parser's limit
            self.setup_error = f"invalid session input: {clip(str(error), RECORDED_BYTES)}"
        return SessionInput(message="(invalid input)"), None

    # ------------------------------------------------------------------ the loop

    @workflow.run
    async def run(self, request: RawValue = None) -> SessionSummary:  # type: ignore[assignment]
        if self.setup_error:
            raise ApplicationError(self.setup_error, type="InvalidSessionInput", non_retryable=True)
        self.behaviours = behaviours = Behaviours.at_run_start()  # see workflows/patches.py
        self.hands_over_anywhere = behaviours.hands_over_anywhere
        self.edit_regexes = not behaviours.edits_without_regexes
        self.verdicts_locally = behaviours.verdicts_by_local_activity
        self.verdicts_cached = behaviours.verdicts_cached_per_run
        self.authorized = behaviours.authorization_model
        if self.authorized:
            self.verifier.bound = True
        if self.hands_over_anywhere and workflow.info().continued_run_id is None:
            await self.check_tool_names()
        if behaviours.publishes_and_verifies:
            await self.learn_environment()
        try:
            if self.in_turn:  # this run continues a turn the previous run was in
                await self.guarded(self.run_turn(resumed=True))
            while await self.next_user_turn():
                await self.guarded(self.run_turn())
        except asyncio.CancelledError:
            self.close("cancelled through Temporal")
            raise
        await self.let_in_flight_work_finish()
        return SessionSummary(reason=self.closed_reason or "closed", turns=self.turn, last_answer=self.last_answer)

    async def let_in_flight_work_finish(self) -> None:
        """Update handlers still replying, and notifications still being sent, finish before the
        run ends. An activity that completes while the closing task is in flight makes Temporal
        fail that task (UnhandledCommand), which aborts any Update it carried: a person's cancel
        would come back as an error.

        After a person's cancel the session closes a moment later, in a task its own timer
        starts: what a client sends right after its cancel (an `approve`) arrives while the
        cancel's task is in flight, and a closing completion that races a signal is failed by
        the server (UNHANDLED_COMMAND) and retried, a failed task operators are paged for.
        Arriving first, the signal is refused and audited like any other."""
        if self.cancel_reason is not None and self.behaviours.closes_after_a_cancel_grace():
            await workflow.sleep(CANCEL_GRACE)
        if self.behaviours.closes_after_notifications():
            await workflow.wait_condition(lambda: workflow.all_handlers_finished() and not self.notifications_in_flight)
        else:
            await workflow.wait_condition(workflow.all_handlers_finished)

    async def learn_environment(self) -> None:
        """Which search attributes to publish and which keys sign decisions, as this run's
        worker knows them (recorded, so a replay sees the same). A verified session that
        no key could ever satisfy is refused at once rather than left waiting for ever."""
        if self.authorized:
            facts = await workflow.execute_local_activity(
                "session_facts", FactsRequest(
                    verified_decisions=self.config.verified_decisions,
                    rules=self.config.model_dump(include={*RULE_FIELDS, "verified_decisions", "escalate_to", "by"}),
                ),
                result_type=SessionFacts, start_to_close_timeout=timedelta(seconds=10),
                summary="search attributes, decision keys and the operator's policy",
            )
        else:
            facts = await workflow.execute_local_activity(
                "session_environment", self.config.verified_decisions, result_type=SessionFacts,
                start_to_close_timeout=timedelta(seconds=10), summary="search attributes and decision keys",
            )
        if facts.policy_problems:
            raise ApplicationError(f"invalid session input: {'; '.join(facts.policy_problems)}",
                                   type="InvalidSessionInput", non_retryable=True)
        if facts.trusted_keys:
            self.verifier.trusted_keys = facts.trusted_keys
        if self.authorized:  # runs recorded before this kept no such distinction
            self.start_asserted = not self.verifier.proves_start(self.config, workflow.info().workflow_id,
                                                                 workflow.now())
        if self.verifier.required and not self.verifier.trusted_keys:
            raise ApplicationError(
                "invalid session input: verified_decisions needs a worker that trusts the API's signing key "
                "(HITL_TRUSTED_KEYS, or the key file the API creates; see docs/interface.md, 'The HTTP API and the web inbox')",
                type="InvalidSessionInput", non_retryable=True,
            )
        self.publisher.start(facts.registered_search_attributes)
        self.publish()
        if self.authorized:
            self.publish_who()

    def publish_who(self) -> None:
        """Who the session belongs to, in its memo: the API decides who may read a session from
        this without a query (a query of a closed session replays its whole history)."""
        who = {"owner": self.config.by, "participants": self.config.participants,
               "verified": self.config.verified_decisions}
        try:
            current = workflow.memo_value(SESSION_MEMO, default=None)
        except Exception:
            current = None
        if current != who:
            workflow.upsert_memo({SESSION_MEMO: who})

    async def check_tool_names(self) -> None:
        """Rules that name an unknown tool are refused, judged by the worker's catalog as the
        session starts; a local activity records the verdict, so a later catalog cannot change it."""
        problems = await workflow.execute_local_activity(
            "unknown_tools", self.config.model_dump(include=RULE_FIELDS), result_type=list[str],
            start_to_close_timeout=timedelta(seconds=10), summary="check the rules' tool names",
        )
        if problems:
            raise ApplicationError(f"invalid session input: {'; '.join(problems)}", type="InvalidSessionInput", non_retryable=True)

    async def next_user_turn(self) -> bool:
        if self.turn:
            self.set_state("idle")
        if self.idle_until is None:
            self.idle_until = workflow.now() + timedelta(seconds=self.config.idle_timeout_seconds)
        if self.history_is_long():
            # Between turns nothing is in flight: the session starts a fresh run with what it carries.
            await self.hand_over()
        while True:
            # Waited on even when a message is already here: the timer's sequence number
            # is part of the recorded history that paused sessions replay.
            try:
                await workflow.wait_condition(
                    lambda: bool(self.inbox) or self.cancel_reason is not None or self.should_hand_over(),
                    timeout=max(timedelta(0), self.idle_until - workflow.now()),
                )
            except asyncio.TimeoutError:
                self.close(f"idle for {self.config.idle_timeout_seconds:g} seconds")
                return False
            if self.inbox or self.cancel_reason is not None:
                break
            await self.hand_over()
        self.idle_until = None
        if self.cancel_reason is not None:
            self.close(f"cancelled: {self.cancel_reason}")
            return False
        return True

    async def run_turn(self, resumed: bool = False) -> None:
        if not resumed:
            self.turn += 1
            self.steps = 0
            self.error = None
            self.results_this_turn = []
            self.take_in_messages()
        self.in_turn = True
        self.set_state("running")
        if self.step is not None:  # the previous run handed over in the middle of a step
            await self.finish_step()
            self.take_in_messages()
        while self.cancel_reason is None:
            if self.steps >= self.config.max_steps:
                self.error = f"stopped after max_steps={self.config.max_steps} without a final answer"
                break
            await self.hand_over_if_long()
            reply = await self.reason()
            if self.cancel_reason is not None:
                break
            if reply is None:
                if self.interrupt_requested:  # re-plan with the message that interrupted
                    self.take_in_messages()
                    continue
                break
            self.append(self.conversation.assistant_message(reply))
            self.authors_of_reply, self.authors_since_reply = self.authors_since_reply, []
            workflow.logger.info("step", extra={"session": workflow.info().workflow_id, "turn": self.turn,
                                                "step": self.steps, "tools": [c.name for c in reply.tool_calls]})
            if not reply.tool_calls:
                self.last_answer = reply.content or ""
                self.event_log.add("answer", workflow.now(), text=self.last_answer)
                break
            if self.verdicts_locally:
                reply = await self.judge_calls(reply)
            self.step = Step(plans=plan_reply(reply, self.offered, self.config))
            for plan in self.step.plans:
                self.open_pause_if_needed(plan)
            await self.finish_step()
            if self.cancel_reason is not None:
                break
            self.take_in_messages()
        self.in_turn = False

    async def guarded(self, turn: Awaitable[None]) -> None:
        """The last line of defence: a bug in the loop's bookkeeping ends the turn with an
        error the person can read, never a workflow task that fails on every retry."""
        try:
            await turn
        except Exception as error:
            if isinstance(error, workflow.NondeterminismError):
                raise
            workflow.logger.exception("the turn stopped on an internal error")
            self.error = f"the turn stopped on an internal error: {clip(f'{type(error).__name__}: {error}', RECORDED_BYTES)}"
            why = "The turn stopped on an internal error before this call was settled"
            self.settle_all("cancelled", why)
            self.step = None
            for call_id in self.conversation.unanswered_call_ids():
                self.add_tool_result(call_id, f"{why}.")
            self.in_turn = False

    async def reason(self) -> ModelReply | None:
        """One model call; None when it failed for good or was cancelled or interrupted.

        The activity gets a reference to the conversation, not the conversation:
        it reads the messages through the `model_context` query, so the history
        records each message once however many steps follow.
        """
        self.steps += 1
        self.total_steps += 1
        info = workflow.info()
        reference = ConversationRef(
            session_id=info.workflow_id, run_id=info.run_id, message_count=len(self.conversation.messages),
            prefix_sha256=self.chain[-1] if self.chain else "", model=self.config.model,
        )
        call = asyncio.ensure_future(
            workflow.execute_activity(
                "call_model", reference, result_type=ModelReply, summary=f"model, turn {self.turn} step {self.steps}", **MODEL_CALL
            )
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
        reply = with_unique_call_ids(reply, set(self.used_call_ids) | self.conversation.used_call_ids(), self.total_steps)
        self.used_call_ids = newest([*self.used_call_ids, *(call.id for call in reply.tool_calls)], CALL_IDS_KEPT)
        return reply

    async def judge_calls(self, reply: ModelReply) -> ModelReply:
        """The reply with the catalog's verdict on each call (run, ask a person, refuse) from a
        local activity. The model activity's own verdict is not taken: anyone who reaches the
        Temporal frontend can complete an activity by its id, and a forged `"action": "run"`
        would run a call no person decided, on verified sessions too. A local activity runs
        in this worker and is recorded as a marker: nobody outside can answer it.

        A forged verdict can only hurt by saying "run": "approve", "ask" and "refuse" all stop
        for a person or refuse. So the model activity's verdict is taken as it is when every
        "run" in it names a tool the local activity already judged auto-run in this run; any
        other "run" is judged again. One marker per tool per run instead of one per step."""
        if self.authorized:
            return await self.judge_by_worker(reply)
        claimed = reply.catalog_plans or []
        if self.verdicts_cached and len(claimed) == len(reply.tool_calls) and all(
            plan.get("tool") == call.name and (plan.get("action") != "run" or verdict_of(plan) == self.judged_auto_run.get(call.name))
            for plan, call in zip(claimed, reply.tool_calls)
        ):
            return reply
        plans = await workflow.execute_local_activity(
            "catalog_verdicts", VerdictRequest(reply=reply.model_copy(update={"catalog_plans": None}), tools=self.config.tools),
            result_type=list[dict[str, Any]], start_to_close_timeout=timedelta(seconds=30),
            summary="judge the calls against the tool catalog",
        )
        for plan, call in zip(plans, reply.tool_calls):
            if plan.get("action") == "run" and plan.get("tool") == call.name:
                self.judged_auto_run[call.name] = verdict_of(plan)
        return reply.model_copy(update={"catalog_plans": plans})

    async def judge_by_worker(self, reply: ModelReply) -> ModelReply:
        """Every reply's calls judged in this worker, each from its own arguments: the catalog,
        the operator's policy (read now), the definitions this session pinned, and whether
        untrusted output entered the turn. Nothing the model activity returned is taken."""
        reused = self.reused_verdicts(reply)
        if reused is not None:
            return reply.model_copy(update={"catalog_plans": reused})
        called = {call.name for call in reply.tool_calls}
        judgement = await workflow.execute_local_activity(
            "judge_calls", JudgementRequest(
                reply=reply.model_copy(update={"catalog_plans": None}), tools=self.config.tools,
                pins={tool: pin for tool, pin in self.pins.items() if tool in called},
                results_this_turn=self.results_this_turn,
            ),
            result_type=Judgement, start_to_close_timeout=timedelta(seconds=30),
            summary="judge the calls: catalog and operator's policy",
        )
        for tool, pin in judgement.new_pins.items():
            if pin.accepted or (tool not in self.pins and len(self.pins) < PINS_KEPT):
                self.pins[tool] = pin
        for plan in judgement.plans:
            if plan.get("reusable"):
                self.reusable_runs[plan["tool"]] = ({k: v for k, v in plan.items() if k not in ("args", "args_as_sent")},
                                                    workflow.now())
        return reply.model_copy(update={"catalog_plans": with_recorded_args(judgement.plans, reply)})

    def reused_verdicts(self, reply: ModelReply) -> list[dict[str, Any]] | None:
        """The worker's recent "run" for every call of the reply, when each tool's verdict holds for
        any arguments (the worker said so), with the call's own arguments; None to ask the worker.
        Nothing here comes from the model activity; the tool activity checks the arguments again."""
        plans, now = [], workflow.now()
        for call in reply.tool_calls:
            found = self.reusable_runs.get(call.name)
            if found is None or now - found[1] > VERDICT_REUSE or utf8_size(call.function.arguments) > MAX_ARGUMENT_BYTES:
                return None
            plans.append({**found[0], "args_as_sent": True})
        plans = with_recorded_args(plans, reply)
        return plans if plans and all(isinstance(plan["args"], dict) for plan in plans) else None

    async def finish_step(self) -> None:
        """Settle every call of the step: wait for decisions, run what may run, wait for reviews.

        Each result joins the conversation as soon as it is final (results may
        come in any order after their calls), so a hand-over mid-step carries
        only what still waits.
        """
        step = self.step
        assert step is not None
        if not step.ran:
            await self.wait_for_people()
            outcomes = await asyncio.gather(*(self.outcome_of(plan) for plan in step.plans))
            for plan, outcome in zip(step.plans, outcomes):
                if plan.review and outcome.ran:
                    self.request_person("review", plan, result=outcome.text)
                else:
                    self.add_tool_result(plan.call_id, outcome.text)
            step.ran = True
        await self.wait_for_people()
        for plan in step.plans:
            if plan.call_id in self.pauses.settled:
                self.add_tool_result(plan.call_id, self.pauses.collect(plan.call_id).result or "")
        self.step = None

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
        elif plan.action == "run" and self.authorized:
            self.record("auto_approved", plan.call_id, plan.tool, args_sha256(plan.args),
                        rule="the tool's own setting: it runs without asking"
                        + ("; a person reviews its result" if plan.review else ""))

    async def outcome_of(self, plan: PlannedCall) -> ToolOutcome:
        cancelled = f"The session was cancelled ({self.cancel_reason}); the tool did not run."
        if plan.action == "refuse":
            return ToolOutcome(text=plan.refusal or "Error: refused")
        if plan.action == "run":
            if self.cancel_reason is not None:
                return ToolOutcome(text=cancelled)
            return await self.run_tool(plan.call_id, plan.tool, plan.args)
        settlement = self.pauses.collect(plan.call_id)
        if settlement.run_with is None:
            return ToolOutcome(text=settlement.result or "")
        if self.cancel_reason is not None:  # approved, then cancelled before it started: it does not run
            return ToolOutcome(text=cancelled)
        outcome = await self.run_tool(plan.call_id, plan.tool, settlement.run_with)
        if settlement.note:
            outcome.text = f"{settlement.note}\n\n{outcome.text}"
        return outcome

    async def run_tool(self, call_id: str, tool: str, args: dict[str, Any]) -> ToolOutcome:
        invocation = ToolInvocation(session_id=workflow.info().workflow_id, call_id=call_id, tool=tool, args=args)
        try:
            output = await workflow.execute_activity(
                "run_tool", invocation, result_type=str, summary=f"{tool} ({call_id})", **TOOL_CALL
            )
        except ActivityError as error:
            # An error's text is the tool's (an MCP server's isError result, an exception's message):
            # it enters the conversation like a result, so it counts as the tool's output too.
            self.output_entered(tool, call_id)
            return ToolOutcome(text=f"Error: {tool} failed: {failure_message(error)}")
        self.output_entered(tool, call_id)
        return ToolOutcome(text=output, ran=True)

    def output_entered(self, tool: str, call_id: str) -> None:
        """The first output of each tool in the turn, for the policy's untrusted_output. Past
        RESULTS_KEPT tools, one entry says more came (the judgement counts it as untrusted), so no
        number of harmless calls can push an untrusted one out."""
        turn = self.results_this_turn
        if any(seen in (tool, MORE_TOOLS) for seen, _ in turn):
            return
        self.results_this_turn = [*turn, (tool, call_id) if len(turn) < RESULTS_KEPT else (MORE_TOOLS, call_id)]

    def take_in_messages(self) -> None:
        """Steering: messages that arrived mid-turn join at this step boundary."""
        for message in self.inbox:
            self.append(ChatMessage(role="user", content=message.text))
            self.speaker = message.by
            self.speaker_asserted = message is self.first_message and self.start_asserted
            if message.by not in self.authors_since_reply:
                self.authors_since_reply.append(message.by)
            self.event_log.add("message", workflow.now(), text=message.text, by=message.by)
        self.inbox.clear()
        self.interrupt_requested = False

    def append(self, message: ChatMessage) -> None:
        self.conversation.append(message)
        self.chain.append(message_sha256(self.chain[-1] if self.chain else "", message))

    def add_tool_result(self, call_id: str, text: str) -> None:
        self.append(self.conversation.tool_result(call_id, text))
        self.event_log.add("tool_result", workflow.now(), call_id=call_id, tool=self.conversation.tool_name_of(call_id), content=text)

    # ------------------------------------------------------ continue-as-new

    def history_is_long(self) -> bool:
        """Time to continue as new: past the session's event budget or HISTORY_BYTES_LIMIT.

        Sessions that hand over anywhere follow their own budgets rather than
        the server's early suggestion (about 4 MB): each hand-over carries the
        model's recent view, so fewer, larger runs store less in all.
        """
        info = workflow.info()
        if info.get_current_history_length() >= self.config.continue_as_new_after_events:
            return True
        if self.hands_over_anywhere:
            return info.get_current_history_size() >= HISTORY_BYTES_LIMIT
        return info.is_continue_as_new_suggested()

    def should_hand_over(self) -> bool:
        """Wake a wait to hand over (only sessions that may hand over anywhere)."""
        return self.hands_over_anywhere and not self.hand_over_blocked and self.history_is_long()

    async def hand_over_if_long(self) -> None:
        if self.should_hand_over():
            await self.hand_over()

    async def hand_over(self) -> None:
        """Continue as new with everything the next run needs; raises ContinueAsNewError.

        Handlers and notifications still in flight finish first: Temporal
        drops an activity's result once its run has ended.
        """
        self.handing_over = True  # Updates waiting for the session to settle answer now
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and not self.notifications_in_flight)
        carried = shrink_to_fit(self.carry(), self.conversation)
        if carried is None:
            workflow.logger.warning("too much waits for people to hand over now; trying again once it settles")
            self.hand_over_blocked = True
            self.handing_over = False
            return
        workflow.continue_as_new(self.config.model_copy(update={"carried": carried.model_dump(mode="json")}))

    def carry(self) -> CarriedState:
        self.pauses.decided = dict(newest(list(self.pauses.decided.items()), DECIDED_KEPT))
        return CarriedState(
            messages=self.conversation.messages, first_message_index=self.message_offset,
            inbox=self.inbox, grants=self.live_grants(), audit=newest(self.audit_trail, AUDIT_CARRIED),
            first_audit_index=self.audit_offset + max(0, len(self.audit_trail) - AUDIT_CARRIED),
            ignored_signals=self.ignored_signals, turn=self.turn, total_steps=self.total_steps,
            last_answer=self.last_answer, speaker=self.speaker, in_turn=self.in_turn, steps=self.steps,
            error=self.error, interrupt_requested=self.interrupt_requested, step=self.step, pauses=self.pauses,
            used_call_ids=self.used_call_ids, cancel_reason=self.cancel_reason, idle_until=self.idle_until,
            events=self.event_log.carried(), verifier=self.verifier, pins=self.pins,
            results_this_turn=self.results_this_turn, speaker_asserted=self.speaker_asserted,
            authors_since_reply=self.authors_since_reply, authors_of_reply=self.authors_of_reply,
        )

    def resume(self, carried: CarriedState) -> None:
        for message in carried.messages:
            self.append(message)
        self.message_offset = carried.first_message_index
        self.inbox = list(carried.inbox)
        self.grants = list(carried.grants)
        self.audit_trail, self.audit_offset = list(carried.audit), carried.first_audit_index
        self.ignored_signals = list(carried.ignored_signals)
        self.turn, self.total_steps, self.steps = carried.turn, carried.total_steps, carried.steps
        self.last_answer, self.speaker, self.error = carried.last_answer, carried.speaker, carried.error
        self.in_turn, self.step, self.pauses = carried.in_turn, carried.step, carried.pauses
        self.interrupt_requested, self.cancel_reason = carried.interrupt_requested, carried.cancel_reason
        self.used_call_ids, self.idle_until = list(carried.used_call_ids), carried.idle_until
        self.event_log = carried.events or EventLog()
        self.settled_event = self.event_log.last_id
        if carried.verifier is not None:
            self.verifier = carried.verifier
        self.pins, self.results_this_turn = dict(carried.pins), list(carried.results_this_turn)
        self.speaker_asserted = carried.speaker_asserted
        self.authors_since_reply, self.authors_of_reply = list(carried.authors_since_reply), list(carried.authors_of_reply)
        if self.pauses.is_waiting():
            self.state = "awaiting_human"
        elif self.in_turn or self.inbox:
            self.state = "running"
        else:
            self.state = "idle"

    # ------------------------------------------------------------- the pauses

    def request_person(self, kind: PauseKind, plan: PlannedCall, result: str | None = None) -> None:
        rules, now = self.config, workflow.now()
        decided_by_approvers = kind != "question"
        approvers = rules.approvers_for(plan.tool) if decided_by_approvers else None
        if decided_by_approvers and plan.approvers is not None:  # the operator's policy names who decides
            approvers = [person for person in approvers or [] if person in plan.approvers] or plan.approvers
        required = rules.approvals_needed(plan.tool) if kind == "approval" else 1
        if kind == "approval" and plan.required_approvals:
            required = max(required, plan.required_approvals)
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
            approvers=approvers,
            required_approvals=required,
            four_eyes=(rules.four_eyes or bool(plan.four_eyes)) and decided_by_approvers,
            remind_at=deadline_after(now, rules.remind_after_seconds),
            escalate_at=deadline_after(now, rules.escalate_after_seconds) if decided_by_approvers else None,
            destructive=plan.destructive if kind == "approval" else None,
            input_schema=plan.input_schema if kind == "approval" else None,
        )
        if self.authorized:
            self.describe_for_the_person(item, plan)
        if kind == "question":
            question = question_of(plan.args)
            item.question = question.question
            item.choices = question.choices
            item.fields = [f.model_dump(exclude_none=True) for f in question.fields] if question.fields else None
        self.pauses.request(item)
        self.record("requested", item.call_id, item.tool, item.args_sha256, by=self.speaker, rule=kind)
        self.event_log.add("pause_opened", now, **compact_item(item, now))
        self.notify("requested", item)

    def describe_for_the_person(self, item: PendingCall, plan: PlannedCall) -> None:
        """What the person deciding needs beside the call: who asked (verified or asserted), what
        led to it, what the model said, what the tool is, and why it waits for them."""
        item.verified = self.config.verified_decisions and not (
            self.speaker_asserted and self.authorized)
        item.led_by, item.model_text = self.conversation.context_of(item.call_id, 1_000)
        spec = CATALOG.get(item.tool)  # what the tool is, as the worker knows it now: shown, not judged
        item.description = clip(spec.description, 500) if spec is not None else None
        item.remember_allowed = False if plan.remember_allowed is False else None
        item.because = {
            "question": "the model asked a person",
            "review": "a person reviews this tool's result before the model sees it",
        }.get(item.kind, plan.because or plan.policy or "the tool needs approval")

    async def wait_for_people(self) -> None:
        """Wait until every open pause is settled: by a person, a message, a cancel or the clock."""
        while self.pauses.is_waiting():
            self.set_state("awaiting_human")
            if self.cancel_reason is not None:
                self.settle_all("cancelled", f"The session was cancelled ({self.cancel_reason})")
                continue
            if self.inbox:
                self.settle_all("moved_on", "The user moved on to a new message without deciding")
                continue
            await self.hand_over_if_long()
            if self.hand_over_blocked and self.history_is_critical():
                self.settle_all("timed_out", "The session could not wait longer without outgrowing Temporal's history limits")
                continue
            next_event = self.pauses.next_event()
            timeout = (next_event - workflow.now()).total_seconds() if next_event else None
            if timeout is None or timeout > 0:
                try:
                    await workflow.wait_condition(
                        lambda: not self.pauses.is_waiting() or bool(self.inbox) or self.cancel_reason is not None
                        or self.should_hand_over(),
                        timeout=timeout,
                    )
                    continue
                except asyncio.TimeoutError:
                    pass
            self.on_the_clock()
        self.set_state("running")

    def history_is_critical(self) -> bool:
        info = workflow.info()
        return info.get_current_history_length() >= HISTORY_EVENTS_CRITICAL or info.get_current_history_size() >= HISTORY_BYTES_CRITICAL

    def on_the_clock(self) -> None:
        """Deadlines, escalations and reminders that have come due; the timeout comes last."""
        now = workflow.now()
        for item in self.pauses.due(now):
            if item.deadline is not None and item.deadline <= now:
                self.record_settlement(self.pauses.expire(item, self.timeouts()[item.kind], now))
                continue
            if item.escalate_at is not None and item.escalate_at <= now:
                item.escalate_at = None
                escalated = self.escalation_for(item)
                if item.approvers is not None:
                    item.approvers = list(dict.fromkeys([*item.approvers, *escalated]))
                self.notify("escalated", item, to=escalated)
            if item.remind_at is not None and item.remind_at <= now:
                item.remind_at = deadline_after(now, self.config.remind_after_seconds)
                self.notify("reminder", item)

    def planned(self, call_id: str) -> PlannedCall | None:
        return next((plan for plan in self.step.plans if plan.call_id == call_id), None) if self.step else None

    def escalation_for(self, item: PendingCall) -> list[str]:
        """Whom an escalation adds: `escalate_to`, less anyone the operator's policy (as it was when
        the call was judged) does not let decide this call; the start only checked the policy then."""
        plan = self.planned(item.call_id) if self.authorized else None
        if plan is None or plan.approvers is None:
            return list(self.config.escalate_to)
        return [person for person in self.config.escalate_to if person in plan.approvers]

    def settle_all(self, outcome: Outcome, why: str) -> None:
        for settlement in self.pauses.settle_all(outcome, why, workflow.now()):
            self.record_settlement(settlement)

    def requested_at(self, call_id: str) -> datetime:
        """When the pause for a call opened (from the audit), for the decision's log line."""
        return next((event.at for event in reversed(self.audit_trail)
                     if event.event == "requested" and event.call_id == call_id), workflow.now())

    def grant_for(self, plan: PlannedCall) -> Grant | None:
        """A remembered approval that covers this call; under four-eyes, never its author's own request."""
        sha, now = args_sha256(plan.args), workflow.now()
        if self.authorized and (plan.untrusted or plan.remember_allowed is False or (plan.required_approvals or 1) > 1):
            return None
        four_eyes = self.config.four_eyes or (self.authorized and bool(plan.four_eyes))
        return next((
            grant for grant in self.grants
            if grant.covers(plan.tool, sha, now) and not (four_eyes and grant.by == self.speaker)
            and (not self.authorized or (grant.requested_by == self.speaker
                                         and all(author == grant.requested_by for author in self.authors_of_reply)
                                         and (plan.approvers is None or grant.by in plan.approvers)))
        ), None)

    def live_grants(self) -> list[Grant]:
        now = workflow.now()
        return [grant for grant in self.grants if grant.until > now]

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
            self.notifications_in_flight += 1
            try:
                await workflow.execute_activity(
                    "notify", notification, summary=f"notify {', '.join(notification.to) or 'anyone'}: {event}", **NOTIFY_CALL
                )
            except ActivityError as error:
                workflow.logger.warning("notification failed: %s", failure_message(error))
            finally:
                self.notifications_in_flight -= 1

        asyncio.ensure_future(send())

    # ----------------------------------------------------- signals and Updates
    #
    # Payloads arrive raw (RawValue) and are decoded here, so that one nested
    # past any parser's limit, or in an unknown encoding, is a recorded
    # refusal rather than a task failure or a log line nobody reads.

    @workflow.signal
    def user_message(self, payload: RawValue) -> None:
        self.signal_or_record("user_message", payload, self.receive_message)

    @workflow.update
    def user_message_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("user_message", payload, self.receive_message)

    @user_message_update.validator
    def check_user_message(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.verifier.check_message(
            self.parse_message(value), workflow.info().workflow_id, workflow.now(), self.run_check(recording=False)))

    @workflow.signal
    def approve(self, payload: RawValue) -> None:
        self.signal_or_record("approve", payload, self.approve_call)

    @workflow.update
    def approve_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("approve", payload, self.approve_call)

    @approve_update.validator
    def check_approve(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.decide("approve", value))

    @workflow.signal
    def reject(self, payload: RawValue) -> None:
        self.signal_or_record("reject", payload, self.reject_call)

    @workflow.update
    def reject_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("reject", payload, self.reject_call)

    @reject_update.validator
    def check_reject(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.decide("reject", value))

    @workflow.signal
    def answer(self, payload: RawValue) -> None:
        self.signal_or_record("answer", payload, self.answer_call)

    @workflow.update
    def answer_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("answer", payload, self.answer_call)

    @answer_update.validator
    def check_answer(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.decide("answer", value))

    @workflow.signal
    def cancel(self, payload: RawValue) -> None:
        self.signal_or_record("cancel", payload, self.request_cancel)

    @workflow.update
    def cancel_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("cancel", payload, self.request_cancel)

    @cancel_update.validator
    def check_cancel(self, payload: RawValue) -> None:
        self.validate(payload, self.parse_cancel)

    @workflow.signal
    def claim(self, payload: RawValue) -> None:
        self.signal_or_record("claim", payload, self.claim_call)

    @workflow.update
    def claim_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("claim", payload, self.claim_call)

    @claim_update.validator
    def check_claim(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.judge_claim("claim", value))

    @workflow.signal
    def release(self, payload: RawValue) -> None:
        self.signal_or_record("release", payload, self.release_call)

    @workflow.update
    def release_update(self, payload: RawValue) -> dict[str, Any]:
        return self.update_or_fail("release", payload, self.release_call)

    @release_update.validator
    def check_release(self, payload: RawValue) -> None:
        self.validate(payload, lambda value: self.judge_claim("release", value))

    # A session that ends (or fails at start) while someone waits has nothing more to say.
    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def wait_until_settled(self, payload: RawValue) -> dict[str, Any]:
        """Answers once the session stops running (a pause, an answer, closed) after the event
        id `after_event` (default 0: the first turn), so a caller gets the outcome of its
        message in one request. It also answers, perhaps still running, when the run hands over
        to a new one (continue-as-new) and when more than MAX_WAITERS wait (the oldest): the
        caller asks again."""
        try:
            request = decoded(payload) or {}
            after = int(request.get("after_event", 0)) if isinstance(request, dict) else 0
        except (Refusal, TypeError, ValueError, OverflowError):
            after = 0
        self.waiters_seen += 1
        waiter = self.waiters_seen
        self.waiters.append(waiter)
        if len(self.waiters) > MAX_WAITERS and self.behaviours.bounds_waiters():
            self.waiters.pop(0)  # the oldest answers now, with the session as it is
        try:
            await workflow.wait_condition(
                lambda: (self.state != "running" and self.settled_event > after) or self.handing_over
                or waiter not in self.waiters
            )
        finally:
            if waiter in self.waiters:
                self.waiters.remove(waiter)
        return {"status": self.status(), "pending": self.pending(), "event": self.event_log.last_id}

    def approve_call(self, payload: Any) -> dict[str, Any]:
        return self.decide_and_apply("approve", payload)

    def reject_call(self, payload: Any) -> dict[str, Any]:
        return self.decide_and_apply("reject", payload)

    def answer_call(self, payload: Any) -> dict[str, Any]:
        return self.decide_and_apply("answer", payload)

    def refuse_if_closing(self) -> None:
        if self.state == "closed":
            raise Refusal("the session is closed", code="conflict")
        if self.cancel_reason is not None:
            raise Refusal("the session is being cancelled; no decision is accepted", code="conflict")

    def proven(self, decision: DecisionBase) -> tuple[Any, SpentProof | None]:
        """On a verified session, the decision as its proof says it was made (see workflows/identity.py)."""
        return self.verifier.check(decision, workflow.info().workflow_id, self.pauses.open, workflow.now(),
                                   self.run_check(recording=not self.validating))

    def run_check(self, recording: bool) -> RunCheck:
        """Proofs count for the run they were made for (see workflows/identity.py, RunCheck).

        A reset run replays, under its new run id, decisions the run it came from accepted; a
        refusal for another run is therefore recorded (a patch marker named by the proof), and on
        replay a proof for another run is refused exactly where such a marker was recorded. A
        validator records nothing (it commands nothing): there a proof for another run is refused."""
        def refused_before(nonce: str) -> bool:
            return workflow.patched(f"hitl-proof-for-another-run-{nonce[:32]}") if recording else True
        return RunCheck(run_id=workflow.info().run_id, refused_before=refused_before)

    def decide(self, verb: str, payload: Any) -> tuple[Verdict, SpentProof | None]:
        """The one rule book for decisions, shared by signals and Update validators."""
        self.refuse_if_closing()
        decision, proof = self.proven(parse_decision(verb, payload))
        return self.pauses.decide(decision, CATALOG, workflow.now(), regexes=self.edit_regexes), proof

    def decide_and_apply(self, verb: str, payload: Any) -> dict[str, Any]:
        verdict, proof = self.decide(verb, payload)
        self.verifier.spend(proof, workflow.now())
        return self.apply(verdict)

    def judge_claim(self, verb: str, payload: Any) -> tuple[ClaimVerdict, SpentProof | None]:
        self.refuse_if_closing()
        request, proof = self.proven(parse_decision(verb, payload))
        now = workflow.now()
        if self.authorized and isinstance(request, Claim) and request.for_seconds > CLAIM_SECONDS_AT_MOST:
            raise Refusal(f"a claim lasts at most {CLAIM_SECONDS_AT_MOST:g} seconds; claim again when it runs out", code="invalid")
        verdict = self.pauses.claim(request, now) if isinstance(request, Claim) else self.pauses.release(request, now)
        return verdict, proof

    def claim_call(self, payload: Any) -> dict[str, Any]:
        return self.hold("claim", payload)

    def release_call(self, payload: Any) -> dict[str, Any]:
        return self.hold("release", payload)

    def hold(self, verb: str, payload: Any) -> dict[str, Any]:
        verdict, proof = self.judge_claim(verb, payload)
        self.verifier.spend(proof, workflow.now())
        item = self.pauses.hold(verdict)
        until = item.claim_until.isoformat() if item.claim_until else None
        self.record("claimed" if until else "released", item.call_id, item.tool, item.args_sha256, by=verdict.by)
        self.event_log.add("claimed" if until else "released", workflow.now(), call_id=item.call_id, by=verdict.by, until=until)
        self.publish()
        return {"accepted": True, "call_id": item.call_id, "claimed_by": item.claimed_by, "claim_until": until}

    def apply(self, verdict: Verdict) -> dict[str, Any]:
        self.pauses.apply(verdict)
        if isinstance(verdict, Vote):
            item = next(item for item in self.pauses.open if item.call_id == verdict.call_id)
            self.record("approved", item.call_id, item.tool, item.args_sha256, by=verdict.by,
                        comment=verdict.comment, rule=verdict.rule)
            self.event_log.add("vote", workflow.now(), call_id=item.call_id, by=verdict.by,
                               approvals=list(item.approvals), required_approvals=item.required_approvals)
            self.publish()
            return {"accepted": True, "call_id": verdict.call_id, "outcome": "awaiting_more_approvals",
                    "approvals": item.approvals, "required_approvals": item.required_approvals}
        self.record_settlement(verdict)
        if verdict.remember is not None and verdict.run_with is not None:
            self.grants = newest([*self.live_grants(), grant_from(
                verdict.remember, verdict.tool, args_sha256(verdict.run_with), verdict.by, verdict.call_id, workflow.now(),
                requested_by=verdict.requested_by,
            )], 100)
        return {"accepted": True, "call_id": verdict.call_id, "outcome": verdict.outcome}

    def parse_message(self, payload: Any) -> UserMessage:
        if self.state == "closed" or self.cancel_reason is not None:
            raise Refusal("the session is closed", code="conflict")
        if isinstance(payload, str):
            payload = {"text": payload}
        try:
            message = UserMessage.model_validate(payload)
        except ValidationError as error:
            raise Refusal(f"malformed user_message: {describe_validation_error(error)}", code="invalid") from None
        queued = sum(utf8_size(queued.text) for queued in self.inbox) + utf8_size(message.text)
        if queued > MAX_QUEUED_BYTES:
            raise Refusal(f"{len(self.inbox)} messages already wait for the agent; send this one once they are taken in", code="conflict")
        return message

    def receive_message(self, payload: Any) -> dict[str, Any]:
        message, proof = self.verifier.check_message(self.parse_message(payload), workflow.info().workflow_id,
                                                     workflow.now(), self.run_check(recording=True))
        self.verifier.spend(proof, workflow.now())
        self.inbox.append(message.model_copy(update={"proof": None}))
        if message.interrupt and self.state == "running":
            self.interrupt_requested = True
        return {"accepted": True, "turn": self.turn, "state": self.state, "interrupting": self.interrupt_requested,
                "event": self.event_log.last_id}

    def parse_cancel(self, payload: Any) -> CancelRequest:
        if self.state == "closed" or self.cancel_reason is not None:
            raise Refusal("the session is already closed or closing", code="conflict")
        try:
            return CancelRequest.model_validate(payload if payload is not None else {})
        except ValidationError as error:
            raise Refusal(f"malformed cancel: {describe_validation_error(error)}", code="invalid") from None

    def request_cancel(self, payload: Any) -> dict[str, Any]:
        self.cancel_reason = self.parse_cancel(payload).reason or "no reason given"
        return {"accepted": True, "state": "closing"}

    def signal_or_record(self, signal: str, payload: RawValue, handle: Callable[[Any], Any]) -> None:
        """A signal never fails the workflow: a refused one is recorded and changes nothing."""
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
        self.ignored_signals = newest(
            [*self.ignored_signals, {"signal": signal, "reason": reason, "at": workflow.now().isoformat()}],
            IGNORED_SIGNALS_KEPT,
        )
        fields = value if isinstance(value, dict) else {}
        self.record("refused", _recorded(fields.get("call_id")), by=_recorded(fields.get("by")), reason=reason, signal=signal)
        self.event_log.add("refused", workflow.now(), signal=signal, reason=reason)

    def validate(self, payload: RawValue, check: Callable[[Any], Any]) -> None:
        """An Update's validator: the rejection quotes at most a few hundred bytes of what was sent.
        (`validating` is true only while it runs: see run_check.)"""
        self.validating = True
        try:
            check(decoded(payload))
        except ProofRefusal:
            return  # accepted only to be refused by the handler, so that the attempt is audited
        except Refusal as refusal:
            raise refused(clip(str(refusal), RECORDED_BYTES * 4), refusal.code) from None
        except Exception as error:
            raise refused(f"internal error: {type(error).__name__}: {clip(str(error), RECORDED_BYTES)}", "conflict") from None
        finally:
            self.validating = False

    def update_or_fail(self, name: str, payload: RawValue, handle: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """Validators refuse most bad Updates before they are recorded; what reaches a handler and
        is refused (a decision without a valid proof, always) is audited like a refused signal."""
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
            "remembered": [view(grant) for grant in self.live_grants()],
            "tools": [spec.name for spec in self.tools_now()],
            "model": self.config.model,
            "closed_reason": self.closed_reason,
            "transcript_messages": self.message_offset + len(self.conversation.messages),
            "owner": self.config.by,
            "participants": self.config.participants,
            "verified": self.config.verified_decisions,
        }

    @workflow.query
    def transcript(self) -> list[dict[str, Any]]:
        """The conversation, whole while it is small; past a megabyte, its newest part
        (`transcript_page` and `python starter.py transcript` read all of it)."""
        page = self.transcript_page(PageRequest(offset=None, limit=1_000_000))
        return page["messages"]

    @workflow.query
    def transcript_page(self, request: PageRequest | None = None) -> dict[str, Any]:
        """Messages [offset, offset+limit) of the whole transcript, or where to find them.

        A run holds the messages from `first_index` on; older ones are in the
        run it continued from (`earlier_run_id`): query that run by its run id.
        """
        messages = [message.to_openai() for message in self.conversation.messages]
        return self.page(messages, self.message_offset, request, "messages")

    @workflow.query
    def audit(self) -> list[dict[str, Any]]:
        return self.audit_page(PageRequest(offset=None, limit=1_000_000))["events"]

    @workflow.query
    def audit_page(self, request: PageRequest | None = None) -> dict[str, Any]:
        events = [event.model_dump(mode="json") for event in self.audit_trail]
        return self.page(events, self.audit_offset, request, "events")

    @workflow.query(name="events")
    def events_after(self, request: EventsRequest | None = None) -> dict[str, Any]:
        """The session's events after an id (see workflows/events.py): what live clients follow."""
        return self.event_log.page(request or EventsRequest())

    @workflow.query
    def model_context(self, reference: ConversationRef) -> ModelRequest:
        """What the model activity sends: the system prompt, the tools and the messages a
        reference names, within the request budget. Queries are not recorded in history."""
        count = reference.message_count
        if count > len(self.conversation.messages) or (self.chain[count - 1] if count else "") != reference.prefix_sha256:
            raise ValueError("stale reference: this run does not hold that conversation")
        view_ = Conversation(messages=self.conversation.messages[:count]).window(MODEL_WINDOW_BYTES, self.message_offset)
        return ModelRequest(
            messages=[ChatMessage(role="system", content=self.system_prompt()), *view_],
            tools=[spec.openai_schema() for spec in self.tools_now()],
            model=self.config.model,
        )

    def tools_now(self) -> list[Any]:
        """The tools this session offers the model now, from the worker's catalog.

        Read by queries only, never recorded: a tool an MCP server adds or drops
        changes the next model call, while what each call was allowed to do is
        the verdict recorded with the model's reply (docs/mcp.md)."""
        return CATALOG.select(self.config.tools)

    def page(self, items: list[dict[str, Any]], first: int, request: PageRequest | None, key: str) -> dict[str, Any]:
        """A page of what this run holds, within PAGE_BYTES; without an offset, the newest page."""
        request = request or PageRequest()
        total, limit = first + len(items), max(1, request.limit)
        newest_first = request.offset is None
        start = max(first, total - limit) if newest_first else min(max(request.offset or 0, first), total)
        window = items[start - first : start - first + limit]
        chosen: list[dict[str, Any]] = []
        size = 0
        for item in reversed(window) if newest_first else window:
            size += json_size(item)
            if chosen and size > PAGE_BYTES:
                break
            chosen.append(item)
        if newest_first:
            chosen.reverse()
            start = total - len(chosen) if window else total
        return {
            "offset": start, "total": total, "first_index": first, key: chosen,
            "earlier_run_id": workflow.info().continued_run_id if first else None,
        }

    # ---------------------------------------------------------------- helpers

    def set_state(self, state: SessionState) -> None:
        """The state, and what an operator reads in the Temporal UI: names and times, no content."""
        if state != self.state:
            self.event_log.add("state", workflow.now(), state=state)
            if state != "running":
                self.settled_event = self.event_log.last_id
        self.state = state
        self.publish()
        waiting = ", ".join(f"{item.kind} of {item.tool}({clip(canonical_json(item.args), 300)}) ({item.call_id})"
                            for item in self.pauses.open)
        detail = {
            "running": f"running turn {self.turn}, step {self.steps}",
            "awaiting_human": f"waiting for people: {waiting}",
            "idle": f"idle after turn {self.turn}",
            "closed": f"closed: {self.closed_reason}",
        }[state]
        workflow.set_current_details(detail)

    def publish(self) -> None:
        """Search attributes and memo for inboxes (workflows/visibility.py), when they change."""
        self.publisher.publish(self.state, self.pauses.open, workflow.now())

    def system_prompt(self) -> str:
        return self.config.system_prompt or DEFAULT_SYSTEM_PROMPT

    def close(self, reason: str) -> None:
        """Settle whatever is still open, so even a closed transcript is well-formed."""
        why = f"The session closed ({reason}) before this call was settled"
        self.settle_all("cancelled", why)
        for call_id in self.conversation.unanswered_call_ids():
            self.add_tool_result(call_id, f"{why}; the tool did not run.")
        self.closed_reason = reason
        self.set_state("closed")

    def record_settlement(self, settlement: Settlement) -> None:
        self.event_log.add(
            "pause_settled", settlement.at, call_id=settlement.call_id, tool=settlement.tool, outcome=settlement.outcome,
            by=settlement.by, reason=settlement.result if settlement.outcome not in ("approved", "edited") else None,
        )
        workflow.logger.info("decision", extra={
            "session": workflow.info().workflow_id, "turn": self.turn, "step": self.steps, "call": settlement.call_id,
            "tool": settlement.tool, "outcome": settlement.outcome, "by": settlement.by,
            "waited_seconds": (settlement.at - self.requested_at(settlement.call_id)).total_seconds(),
        })
        self.record(
            AUDIT_EVENT[settlement.outcome], settlement.call_id, settlement.tool, settlement.args_sha256,
            by=settlement.by, comment=settlement.comment, rule=settlement.rule,
            reason=settlement.result if settlement.outcome not in ("approved", "edited", "answered") else None,
        )

    def record(self, event: str, call_id: str | None = None, tool: str | None = None,
               sha: str | None = None, **details: Any) -> None:
        clipped = {key: clip(value, 1_000) if isinstance(value, str) else value for key, value in details.items()}
        self.audit_trail.append(
            AuditEvent(at=workflow.now(), event=event, call_id=call_id, tool=tool, args_sha256=sha, **clipped)
        )


def refused(reason: str, code: str) -> ApplicationError:
    """An Update's refusal as its caller receives it: the reason, and the code in the details."""
    return ApplicationError(reason, code, type="Refusal", non_retryable=True)


def decoded(payload: RawValue | None | TooManyArguments) -> Any:
    """A raw payload as plain JSON values, or a Refusal that says what is wrong with it.
    None when nothing was sent (see workflows/arity.py)."""
    if payload is None:
        return None
    if not isinstance(payload, RawValue):  # TooManyArguments (made outside the sandbox: compared by what it is)
        raise Refusal(f"malformed payload: {getattr(payload, 'count', 'several')} arguments were sent; send one JSON value", code="invalid")
    try:
        return workflow.payload_converter().from_payload(payload.payload, None)
    except Exception as error:
        raise Refusal(f"malformed payload: {clip(str(error), RECORDED_BYTES)}", code="invalid") from None


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _recorded(value: Any) -> str | None:
    return clip(value, RECORDED_BYTES) if isinstance(value, str) else None


def verdict_of(plan: dict[str, Any]) -> dict[str, Any]:
    """A recorded plan without its arguments: what the catalog decided about the tool."""
    return {key: value for key, value in plan.items() if key != "args"}


def failure_message(error: ActivityError) -> str:
    cause = error.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return getattr(cause, "message", None) or str(cause or error)
