"""The parts of AgentWorkflow, each built from a run's state and its collaborators, with no server.

Each part is a plain object (workflows/agent.py, build_parts): given a SessionRun and the parts
it calls, it can be exercised here the way the workflow calls it. The workflow's own calls
(workflow.now, workflow.info, ...) answer as inside a run; collaborators that would start an
activity (Notices) are subclasses that note what they were asked instead.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.converter import default as default_converter
from temporalio.exceptions import ApplicationError

from activities.tools import CATALOG  # noqa: F401  (registers the built-in tools the pauses below name)
from workflows import contract
from workflows.activity_calls import LocalChecks
from workflows.agents import AgentSpec, ChildPauses
from workflows.child_reports import ChildReports
from workflows.closing import Closing
from workflows.continuing import Continuing
from workflows.conversation import ChatMessage, FunctionCall, ToolCall
from workflows.delegating import ChildPausesTable, Delegating
from workflows.events import EventLog
from workflows.handlers import VERBS, verb_handlers
from workflows.handover import RunState
from workflows.identity import Verifier
from workflows.inbound import Inbound
from workflows.judging import VERDICT_REUSE, Judging
from workflows.notices import Notices
from workflows.pauses import PauseKind, PendingCall, Settlement
from workflows.planning import PlannedCall
from workflows.recorder import AUDIT_TEXT_BYTES, Recorder
from workflows.requests import SessionFacts
from workflows.session import SessionInput, UserMessage
from workflows.session_run import SessionRun
from workflows.starting import Starting, read_input
from workflows.tool_input import ToolInput
from workflows.server_questions import MAX_ROUNDS, AskedInput
from workflows.views import Views
from workflows.waiting import Waiting

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
SESSION_ID = "session-parts"


@pytest.fixture(autouse=True)
def inside_a_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """workflow.* as a run of SESSION_ID answers it; returns the current details the run set."""
    details: list[str] = []
    info = SimpleNamespace(workflow_id=SESSION_ID, run_id="run-1", first_execution_run_id="run-1",
                           continued_run_id=None, parent=None, task_queue="parts", cron_schedule=None, attempt=1,
                           get_current_history_length=lambda: 10, get_current_history_size=lambda: 1_000)
    monkeypatch.setattr(workflow, "now", lambda: NOW)
    monkeypatch.setattr(workflow, "info", lambda: info)
    monkeypatch.setattr(workflow, "patched", lambda patch_id: True)
    monkeypatch.setattr(workflow, "payload_converter", lambda: default_converter().payload_converter)
    monkeypatch.setattr(workflow, "set_current_details", details.append)
    monkeypatch.setattr(workflow, "logger", logging.getLogger("parts"))
    return details


class HeardNotices(Notices):
    """Notices that note what they were asked to send instead of starting the notify activity."""

    def __init__(self, session: SessionRun, checks: LocalChecks) -> None:
        super().__init__(session, checks)
        self.sent: list[tuple[str, str]] = []

    def notify(self, event: str, item: PendingCall, to: list[str] | None = None) -> None:
        self.sent.append((event, item.call_id))

    def notify_settled(self, settlement: Settlement) -> None:
        self.sent.append(("settled", settlement.call_id))


class Parts:
    """Every part of one run, wired as AgentWorkflow.build_parts wires them."""

    def __init__(self, **config: Any) -> None:
        settings = SessionInput.model_validate({"message": "please delete notes.txt", "by": "owner", **config})
        self.session = SessionRun(
            config=settings,
            run_state=RunState(messages=[], turn=1, total_steps=0, events=EventLog(),
                               inbox=[], verifier=Verifier(required=False)),
        )
        session = self.session
        self.checks = LocalChecks()
        self.reports = ChildReports(session)
        self.notices = HeardNotices(session, self.checks)
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

    def a_call(self, call_id: str = "c1", tool: str = "delete_file", args: dict[str, Any] | None = None) -> PlannedCall:
        """A call the model made (in the conversation, so the pause's card can quote it)."""
        args = args if args is not None else {"path": "notes.txt"}
        self.session.append(ChatMessage(role="user", content="please delete notes.txt"))
        self.session.append(ChatMessage(role="assistant", content="deleting it", tool_calls=[
            ToolCall(id=call_id, function=FunctionCall(name=tool, arguments="{}"))]))
        return PlannedCall(call_id=call_id, tool=tool, action="approve", args=args)

    def a_pause(self, kind: PauseKind = "approval") -> PlannedCall:
        plan = self.a_call()
        self.waiting.request_person(kind, plan)
        return plan

    def audited(self) -> list[str]:
        return [event.event for event in self.session.run_state.audit]


async def until(condition: Callable[[], bool], what: str) -> None:
    """Lets the event loop run the tasks this test started until `condition` holds (no clock involved)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not reached after 100 turns of the event loop: {what}")


def raw(value: Any) -> RawValue:
    return RawValue(default_converter().payload_converter.to_payloads([value])[0])


# ------------------------------------------------------------------ the recorder

def test_the_recorder_clips_what_it_audits_and_marks_where_the_session_settled() -> None:
    parts = Parts()
    parts.recorder.record("refused", "c1", by="x" * (AUDIT_TEXT_BYTES * 2), reason="no")
    [row] = parts.session.run_state.audit
    assert row.by is not None and len(row.by.encode()) < AUDIT_TEXT_BYTES + 100 and row.reason == "no"  # with its clip mark

    parts.recorder.set_state("idle")
    assert parts.session.state == "idle"
    assert parts.session.settled_event == parts.session.run_state.events.last_id > 0


def test_a_settlement_is_recorded_in_every_sink_and_its_notice_goes_out(inside_a_run: list[str]) -> None:
    parts = Parts()
    parts.a_pause()
    [settlement] = parts.session.run_state.pauses.settle_all("cancelled", "closing", NOW)
    parts.recorder.record_settlement(settlement, audit_via="temporal")
    assert parts.audited() == ["requested", "cancelled"]
    assert parts.session.run_state.audit[-1].via == "temporal"
    assert ("settled", "c1") in parts.notices.sent


# ------------------------------------------------------------------ waiting and inbound: an approval

def test_a_pause_opens_with_its_audit_event_and_notice() -> None:
    parts = Parts()
    parts.a_pause()
    [item] = parts.session.run_state.pauses.open
    assert (item.call_id, item.kind, item.led_by, item.model_text) == ("c1", "approval", "please delete notes.txt", "deleting it")
    assert parts.audited() == ["requested"]
    assert parts.notices.sent == [("requested", "c1")]
    assert parts.session.run_state.events.events[-1].type == "pause_opened"


def test_an_approval_goes_from_the_signal_through_the_pause_book_to_the_run() -> None:
    """signal_or_record -> decide (the pause book) -> apply -> the recorder: the call may run."""
    parts = Parts()
    parts.a_pause()
    [approve] = [verb for verb in VERBS if verb.name == "approve"]
    parts.inbound.signal_or_record("approve", raw({"call_id": "c1", "by": "ana"}),
                                   lambda value: approve.apply(parts.inbound, value))
    assert not parts.session.run_state.pauses.open
    settlement = parts.session.run_state.pauses.collect("c1")
    assert (settlement.outcome, settlement.by, settlement.run_with) == ("approved", "ana", {"path": "notes.txt"})
    assert parts.audited() == ["requested", "approved"]


def test_a_refused_signal_is_recorded_and_changes_nothing() -> None:
    parts = Parts()
    parts.a_pause()
    parts.inbound.signal_or_record("approve", raw({"call_id": "nope", "by": "ana"}),
                                   lambda value: parts.inbound.decide_and_apply("approve", value))
    assert len(parts.session.run_state.pauses.open) == 1
    assert parts.audited() == ["requested", "refused"]
    assert parts.session.run_state.ignored_signals[-1]["signal"] == "approve"


def test_a_validator_refuses_while_a_local_activity_is_in_flight() -> None:
    parts = Parts()
    parts.a_pause()
    parts.checks.in_flight = 1
    with pytest.raises(ApplicationError) as refused:
        parts.inbound.validate(raw({"call_id": "c1", "by": "ana"}), lambda value: parts.inbound.decide("approve", value))
    assert refused.value.type == "Refusal" and refused.value.details == ("busy",)
    assert parts.session.validating is False and parts.audited() == ["requested"]


def test_a_decision_about_a_childs_call_is_forwarded_to_that_child() -> None:
    parts = Parts()
    child = f"{SESSION_ID}/janitor/1"
    parts.session.run_state.children.append(child)
    parts.session.run_state.child_pauses[child] = ChildPauses(session_id=child, seq=1, items=[
        {"call_id": f"{child}/c9", "child_call_id": "c9", "session_id": child}])
    sent: list[tuple[str, str, Any]] = []
    parts.reports.send_to = lambda session_id, signal, payload: sent.append((session_id, signal, payload))  # type: ignore[method-assign]
    answer = parts.inbound.decide_and_apply("approve", {"call_id": f"{child}/c9", "by": "ana"})
    assert answer["outcome"] == "forwarded" and sent == [(child, "approve", {"call_id": "c9", "by": "ana"})]


# ------------------------------------------------------------------ the verbs

def test_every_verb_of_the_contract_has_one_row_and_its_three_handlers_take_the_contracts_names() -> None:
    assert [verb.name for verb in VERBS] == list(contract.INBOUND)
    for verb in VERBS:
        signal, update = verb_handlers(verb)
        assert signal.__name__ == verb.entry.signal.name and getattr(update, "__name__") == verb.entry.update.name
        assert "self" not in signal.__annotations__  # the SDK reads the instance from an unannotated self


# ------------------------------------------------------------------ closing, views, children

def test_closing_settles_what_waits_and_answers_every_unanswered_call() -> None:
    parts = Parts()
    parts.a_pause()
    parts.closing.close("idle for 60 seconds")
    assert parts.session.state == "closed" and parts.session.closed_reason == "idle for 60 seconds"
    assert not parts.session.run_state.pauses.open and not parts.session.conversation.unanswered_call_ids()
    assert parts.audited() == ["requested", "cancelled"]


def test_pending_lists_the_sessions_pauses_and_those_its_children_reported() -> None:
    parts = Parts()
    parts.a_pause()
    child = f"{SESSION_ID}/janitor/1"
    parts.session.run_state.children.append(child)
    report = ChildPauses(session_id=child, seq=1, items=[{"call_id": f"{child}/c9", "child_call_id": "c9", "session_id": child}])
    parts.children.take_report(raw(report.model_dump(mode="json")))
    assert [item["call_id"] for item in parts.views.pending()] == ["c1", f"{child}/c9"]
    assert parts.views.status().pending == 1

    stranger = ChildPauses(session_id="someone-else", seq=1, items=[])
    parts.children.take_report(raw(stranger.model_dump(mode="json")))
    assert "someone-else" not in parts.session.run_state.child_pauses


# ------------------------------------------------------------------ judging, tool input, continuing, starting

def test_a_verdict_for_any_arguments_is_reused_only_within_its_time() -> None:
    parts = Parts()
    parts.session.reusable_runs["search_web"] = ({"tool": "search_web", "action": "run"}, NOW - VERDICT_REUSE / 2)
    reply = SimpleNamespace(tool_calls=[ToolCall(id="s1", function=FunctionCall(name="search_web", arguments='{"query": "milk"}'))])
    plans = parts.judging.reused_verdicts(reply)  # type: ignore[arg-type]
    assert plans is not None and plans[0]["args"] == {"query": "milk"}
    parts.session.reusable_runs["search_web"] = ({"tool": "search_web", "action": "run"}, NOW - VERDICT_REUSE - timedelta(seconds=1))
    assert parts.judging.reused_verdicts(reply) is None  # type: ignore[arg-type]


async def test_a_server_that_keeps_asking_is_refused_without_a_pause() -> None:
    parts = Parts()
    asked = AskedInput(server="git", key="k", mode="form", question="which branch?")
    retry, refused = await parts.tool_input.answer_tool_input("c1", "git_push", {}, asked, MAX_ROUNDS + 1)
    assert retry is None and refused is not None and "more than" in refused
    assert not parts.session.run_state.pauses.open


def test_a_resumed_run_takes_the_carried_state_and_its_messages() -> None:
    parts = Parts()
    carried = RunState(messages=[ChatMessage(role="user", content="hi")], turn=3, total_steps=4, events=EventLog(),
                       inbox=[UserMessage(text="next", by="owner")], verifier=Verifier(required=False))
    parts.continuing.resume(carried)
    assert parts.session.run_state is carried and parts.session.state == "running"
    assert len(parts.session.conversation.messages) == 1 and len(parts.session.chain) == 1


def test_a_start_input_that_is_wrong_is_a_setup_error_not_an_exception() -> None:
    config, carried, problem = read_input(raw({"mesage": "typo"}))
    assert carried is None and problem is not None and problem.startswith("invalid session input:")
    config, carried, problem = read_input(raw({"message": "hello"}))
    assert (config.message, carried, problem) == ("hello", None, None)


# ------------------------------------------------------------------ delegating, starting, notices

def test_the_agents_a_session_learns_are_offered_as_delegate_tools_and_may_not_redefine_the_operators() -> None:
    parts = Parts()
    janitor = AgentSpec(instructions="tidy the workspace")
    parts.delegating.learn_agents({"janitor": janitor})
    assert parts.delegating.delegates() == {"delegate__janitor": janitor}

    clashing = Parts(agents={"janitor": {"instructions": "something else"}})
    with pytest.raises(ApplicationError, match="a session may add agents, not redefine"):
        clashing.delegating.learn_agents({"janitor": janitor})


async def test_rules_that_name_an_unknown_tool_are_refused_as_the_session_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = Parts(require_approval=["no_such_tool"])
    asked: list[Any] = []

    both_asked = asyncio.Event()

    async def execute_local_activity(name: str, arg: Any, **options: Any) -> Any:
        asked.append((name, arg))
        if len(asked) == 2:
            both_asked.set()
        try:  # neither answers until both were asked: one round
            await asyncio.wait_for(both_asked.wait(), 10)
        except asyncio.TimeoutError:
            raise AssertionError(f"{name} was awaited before the other check was asked: two rounds") from None
        if name == contract.UNKNOWN_TOOLS.name:
            return ["require_approval: unknown tool 'no_such_tool'"]
        return SessionFacts()

    monkeypatch.setattr(workflow, "execute_local_activity", execute_local_activity)
    with pytest.raises(ApplicationError, match="unknown tool 'no_such_tool'") as refused:
        await parts.starting.check_start()
    assert refused.value.type == "InvalidSessionInput" and refused.value.non_retryable
    assert asked[0][0] == contract.UNKNOWN_TOOLS.name and asked[0][1]["require_approval"] == ["no_such_tool"]
    assert [name for name, _ in asked] == [contract.UNKNOWN_TOOLS.name, contract.SESSION_FACTS.name]
    assert parts.checks.in_flight == 0


def test_only_rules_that_name_a_tool_leave_the_catalog_something_to_check() -> None:
    assert not SessionInput(message="hi").name_a_tool()
    assert not SessionInput(message="hi", approvers={"*": ["ana"]}, required_approvals={"*": 2}).name_a_tool()
    assert SessionInput(message="hi", auto_approve=["search_web"]).name_a_tool()
    assert SessionInput(message="hi", approvers={"delete_file": ["ana"]}).name_a_tool()


async def test_a_notice_is_sent_in_the_background_and_counted_until_it_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = Parts()
    sent: list[Any] = []
    release = asyncio.Event()

    async def execute_activity(name: str, notification: Any, **options: Any) -> None:
        sent.append((name, notification.event, notification.item["call_id"]))
        await release.wait()

    monkeypatch.setattr(workflow, "execute_activity", execute_activity)
    notices = Notices(parts.session, parts.checks)
    item = PendingCall(call_id="c1", kind="approval", tool="delete_file", args={}, args_sha256="x", requested_at=NOW,
                       approvers=["ana"])
    notices.notify("requested", item)
    await until(lambda: bool(sent), "the notice's task started")
    assert sent == [(contract.NOTIFY.name, "requested", "c1")]
    assert parts.session.notifications_in_flight == 1 and parts.session.notices_in_flight == {"c1": 1}
    release.set()
    await until(lambda: parts.session.notifications_in_flight == 0, "the notice finished")
    assert parts.session.notifications_in_flight == 0 and parts.session.notices_in_flight == {"c1": 0}
