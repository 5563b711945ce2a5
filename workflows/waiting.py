"""Waiting for people: opening a pause, and its clocks (deadline, escalation, reminder).

A pause is one PendingCall (workflows/pauses.py holds the rule book); this
module is the workflow's side of it: whom a pause waits for, the timer loop
that wakes for whichever clock comes due first, and remembered approvals that
spare a person the same question. The people are told through workflows/notices.py.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

from workflows.activity_calls import LocalChecks
from workflows.continuing import Continuing
from workflows.limits import clip
from workflows.notices import Notices
from workflows.pauses import Outcome, PauseKind, PendingCall, deadline_after
from workflows.planning import PlannedCall
from workflows.recorder import Recorder
from workflows.rules import Grant, args_sha256
from workflows.server_questions import AskedInput, call_of_question
from workflows.session_run import SessionRun
from workflows.visibility import compact_item

with workflow.unsafe.imports_passed_through():
    # The catalog holds tool schemas and approval policies; passed through so
    # the workflow sees the tools the worker registered, not a fresh copy.
    from hitl.catalog import CATALOG, question_of

# Past these the session stops waiting for people rather than be ended by Temporal.
HISTORY_EVENTS_CRITICAL = 45_000
HISTORY_BYTES_CRITICAL = 40_000_000


class Waiting:
    """A part of AgentWorkflow: the pauses of a step, from opening to the clock settling them."""

    def __init__(self, session: SessionRun, checks: LocalChecks, recorder: Recorder, notices: Notices, continuing: Continuing) -> None:
        self.session = session
        self.checks = checks
        self.recorder = recorder
        self.notices = notices
        self.continuing = continuing

    def open_pause_if_needed(self, plan: PlannedCall) -> None:
        if plan.action == "ask":
            self.request_person("question", plan)
        elif plan.action == "approve":
            grant = self.grant_for(plan)
            if grant is None:
                self.request_person("approval", plan)
            else:
                plan.action = "run"
                self.recorder.record("auto_approved", plan.call_id, plan.tool, args_sha256(plan.args), by=grant.by, rule=grant.describe())
        elif plan.action == "run" and plan.policy:
            self.recorder.record("auto_approved", plan.call_id, plan.tool, args_sha256(plan.args), rule=plan.policy)
        elif plan.action == "run":
            self.recorder.record("auto_approved", plan.call_id, plan.tool, args_sha256(plan.args),
                        rule="the tool's own setting: it runs without asking"
                        + ("; a person reviews its result" if plan.review else ""))

    def request_person(self, kind: PauseKind, plan: PlannedCall, result: str | None = None,
                       asked: AskedInput | None = None) -> None:
        rules, now = self.session.config, workflow.now()
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
            requested_by=self.session.run_state.speaker,
            approvers=approvers,
            required_approvals=required,
            four_eyes=(rules.four_eyes or bool(plan.four_eyes)) and decided_by_approvers,
            remind_at=deadline_after(now, rules.remind_after_seconds),
            escalate_at=deadline_after(now, rules.escalate_after_seconds) if decided_by_approvers else None,
            destructive=plan.destructive if kind == "approval" else None,
            input_schema=plan.input_schema if kind == "approval" else None,
        )
        self.describe_for_the_person(item, plan)
        if asked is not None and self.session.behaviours.server_questions_as_their_call:
            self.decided_as_its_call(item)
        if asked is not None:  # a tool's MCP server asks (workflows/tool_input.py)
            item.question, item.choices, item.fields = asked.question, asked.choices, asked.fields
            item.server, item.url, item.domain = asked.server, asked.url, asked.domain
            item.because = f"the MCP server {asked.server} asks a person"
            item.led_by, item.model_text = self.session.conversation.context_of(call_of_question(plan.call_id), 1_000)
        elif kind == "question":
            question = question_of(plan.args)
            item.question = question.question
            item.choices = question.choices
            item.fields = [f.model_dump(exclude_none=True) for f in question.fields] if question.fields else None
        self.session.run_state.pauses.request(item)
        self.recorder.record("requested", item.call_id, item.tool, item.args_sha256, by=self.session.run_state.speaker, rule=kind)
        self.session.run_state.events.add("pause_opened", now, **compact_item(item, now))
        self.notices.notify("requested", item)

    def decided_as_its_call(self, item: PendingCall) -> None:
        """An MCP server's question during a call that waited for approval decides that call: its
        approvers answer it, under its four-eyes rule (workflows/deciders.py)."""
        call = self.planned(call_of_question(item.call_id))
        if call is None or call.action != "approve":
            return
        approvers = self.session.config.approvers_for(call.tool)
        if call.approvers is not None:
            approvers = [person for person in approvers or [] if person in call.approvers] or call.approvers
        item.approvers = approvers
        item.four_eyes = self.session.config.four_eyes or bool(call.four_eyes)

    def describe_for_the_person(self, item: PendingCall, plan: PlannedCall) -> None:
        """What the person deciding needs beside the call: who asked (verified or asserted), what
        led to it, what the model said, what the tool is, and why it waits for them."""
        item.verified = self.session.config.verified_decisions and not self.session.run_state.speaker_asserted
        item.led_by, item.model_text = self.session.conversation.context_of(item.call_id, 1_000)
        spec = CATALOG.get(item.tool)  # what the tool is, as the worker knows it now: shown, not judged
        item.description = clip(spec.description, 500) if spec is not None else None
        item.remember_allowed = False if plan.remember_allowed is False else None
        item.because = {
            "question": "the model asked a person",
            "review": "a person reviews this tool's result before the model sees it",
        }.get(item.kind, plan.because or plan.policy or "the tool needs approval")

    async def wait_for_people(self) -> None:
        """Wait until every open pause is settled: by a person, a message, a cancel or the clock."""
        while self.session.run_state.pauses.is_waiting():
            self.recorder.set_state("awaiting_human")
            if self.session.run_state.cancel_reason is not None:
                self.settle_all("cancelled", f"The session was cancelled ({self.session.run_state.cancel_reason})")
                continue
            if self.session.run_state.inbox:
                self.settle_all("moved_on", "The user moved on to a new message without deciding")
                continue
            await self.continuing.hand_over_if_long()
            if self.session.hand_over_blocked and self.history_is_critical():
                self.settle_all("timed_out", "The session could not wait longer without outgrowing Temporal's history limits")
                continue
            next_event = self.session.run_state.pauses.next_event()
            timeout = (next_event - workflow.now()).total_seconds() if next_event else None
            if timeout is None or timeout > 0:
                try:
                    await workflow.wait_condition(
                        lambda: not self.session.run_state.pauses.is_waiting() or bool(self.session.run_state.inbox)
                        or self.session.run_state.cancel_reason is not None or self.continuing.should_hand_over(),
                        timeout=timeout,
                    )
                    continue
                except asyncio.TimeoutError:
                    self.checks.history_moved_on()  # the timer fired
            self.on_the_clock()
        self.recorder.set_state("running")

    def history_is_critical(self) -> bool:
        history = self.checks.history_reading()
        return history.length >= HISTORY_EVENTS_CRITICAL or history.size >= HISTORY_BYTES_CRITICAL

    def on_the_clock(self) -> None:
        """Deadlines, escalations and reminders that have come due; the timeout comes last."""
        now = workflow.now()
        for item in self.session.run_state.pauses.due(now):
            if item.deadline is not None and item.deadline <= now:
                self.recorder.record_settlement(self.session.run_state.pauses.expire(item, self.timeouts()[item.kind], now))
                continue
            if item.escalate_at is not None and item.escalate_at <= now:
                item.escalate_at = None
                escalated = self.escalation_for(item)
                if item.approvers is not None:
                    item.approvers = list(dict.fromkeys([*item.approvers, *escalated]))
                self.notices.notify("escalated", item, to=escalated)
            if item.remind_at is not None and item.remind_at <= now:
                item.remind_at = deadline_after(now, self.session.config.remind_after_seconds)
                self.notices.notify("reminder", item)

    def planned(self, call_id: str) -> PlannedCall | None:
        step = self.session.run_state.step
        return next((plan for plan in step.plans if plan.call_id == call_id), None) if step else None

    def escalation_for(self, item: PendingCall) -> list[str]:
        """Whom an escalation adds: `escalate_to`, less anyone the operator's policy (as it was when
        the call was judged) does not let decide this call; the start only checked the policy then."""
        plan = self.planned(item.call_id)
        if plan is None or plan.approvers is None:
            return list(self.session.config.escalate_to)
        return [person for person in self.session.config.escalate_to if person in plan.approvers]

    def settle_all(self, outcome: Outcome, why: str) -> None:
        for settlement in self.session.run_state.pauses.settle_all(outcome, why, workflow.now()):
            self.recorder.record_settlement(settlement)

    def grant_for(self, plan: PlannedCall) -> Grant | None:
        """A remembered approval that covers this call; under four-eyes, never its author's own request."""
        sha, now = args_sha256(plan.args), workflow.now()
        if (plan.untrusted or plan.remember_allowed is False or (plan.required_approvals or 1) > 1):
            return None
        four_eyes = self.session.config.four_eyes or bool(plan.four_eyes)
        return next((
            grant for grant in self.session.run_state.grants
            if grant.covers(plan.tool, sha, now) and not (four_eyes and grant.by == self.session.run_state.speaker)
            and grant.requested_by == self.session.run_state.speaker
            and all(author == grant.requested_by for author in self.session.run_state.authors_of_reply)
            and (plan.approvers is None or grant.by in plan.approvers)
        ), None)

    def live_grants(self) -> list[Grant]:
        return self.session.run_state.live_grants(workflow.now())

    def timeouts(self) -> dict[PauseKind, float]:
        return {
            "approval": self.session.config.approval_timeout_seconds,
            "question": self.session.config.answer_timeout_seconds,
            "review": self.session.config.approval_timeout_seconds,
        }
