"""Delegation: a `delegate__<name>(task)` call runs as a child AgentWorkflow, its final answer the result.

A child is a session of its own (its history, budgets and hand-overs), started by its parent
with workflow id `<parent id>/<agent>/<n>`, n counting the parent session's delegations from 1.
Its input carries the root's rules whole (workflows/agents.py, child_input), so whoever owns,
sees and decides in the root does in every child, and the operator's policy binds it as it
binds every session this worker runs. A child answers once and closes; one that fails, is
cancelled or stops without an answer is a tool error its parent's model reads.

Children are started with parent_close_policy REQUEST_CANCEL: a root that closes (cancelled,
or through Temporal) cancels them, and each settles what it waits for as any cancelled session
does (workflows/closing.py). A person's cancel of the parent cancels a child still working at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowCancellationType, ParentClosePolicy

from workflows.agents import MAX_DEPTH, AgentSpec, ChildPauses, Delegation, ForwardedToChild, agent_of, child_input, delegate_tool, merged, offered_agents
from workflows.contract import WORKFLOW
from workflows.activity_calls import LocalChecks
from workflows.child_reports import DECISIONS, ChildReports
from workflows.closing import Closing
from workflows.payloads import decoded
from workflows.limits import RECORDED_BYTES, clip
from workflows.recorder import AUDIT_TEXT_BYTES, Recorder
from workflows.session import DEFAULT_SYSTEM_PROMPT, AuditEvent, SessionSummary
from workflows.session_run import SessionRun

# The reason a child closes with once it has answered its task.
TASK_ANSWERED = "answered its task"


class Delegating:
    """A part of AgentWorkflow: the agents it may delegate to, and each delegation."""

    def __init__(self, session: SessionRun, checks: LocalChecks, closing: Closing, children: ChildPausesTable) -> None:
        self.session = session
        self.checks = checks
        self.closing = closing
        self.children = children

    def depth(self) -> int:
        return len(self.session.config.delegated.path) if self.session.config.delegated else 0

    def delegates(self) -> dict[str, AgentSpec]:
        """The agents this session offers the model, by their delegate tool's name."""
        return {delegate_tool(name): self.session.agents[name]
                for name in offered_agents(self.session.agents, self.session.config.tools, self.depth())}

    def learn_agents(self, operator: dict[str, AgentSpec]) -> None:
        """This run's agents: the operator's and the session's, or, in a child, its parent's table.
        A session that says it is a child is refused unless Temporal says that parent started it."""
        delegated = self.session.config.delegated
        if delegated is not None:
            parent = workflow.info().parent
            if parent is None or parent.workflow_id != delegated.parent:
                raise ApplicationError("invalid session input: delegated: only the parent session named there may "
                                       "start a child session", type="InvalidSessionInput", non_retryable=True)
            self.session.agents = dict(self.session.config.agents or {})
            return
        try:
            self.session.agents = merged(operator, self.session.config.agents)
        except ValueError as error:
            raise ApplicationError(f"invalid session input: {error}", type="InvalidSessionInput",
                                   non_retryable=True) from None

    def answered_its_task(self) -> bool:
        """A child closes once its one turn ended (not when it was cancelled: that closes as usual)."""
        if self.session.config.delegated is None or not self.session.run_state.turn or self.session.run_state.cancel_reason is not None:
            return False
        self.closing.close(self.session.run_state.error or TASK_ANSWERED)
        return True

    async def delegate(self, tool: str, args: dict[str, Any]) -> str:
        """The child's final answer, or an error its parent's model reads."""
        name = agent_of(tool) or ""
        if name not in self.session.agents:
            return f"Error: {tool} failed: there is no agent named {name!r} any more"
        self.session.run_state.delegations += 1
        info = workflow.info()
        above = self.session.config.delegated
        delegation = Delegation(parent=info.workflow_id, root=above.root if above else info.workflow_id,
                                path=[*(above.path if above else []), name],
                                **({"asked_by": self.session.run_state.speaker} if self.session.behaviours.tree_asked_and_audited else {}))
        start = child_input(self.session.config.model_dump(mode="json", exclude_none=True), self.session.agents, name,
                            str(args.get("task", "")), delegation, DEFAULT_SYSTEM_PROMPT)
        child_id = f"{info.workflow_id}/{name}/{self.session.run_state.delegations}"
        try:
            child = await workflow.start_child_workflow(
                WORKFLOW, start, id=child_id, task_queue=info.task_queue, result_type=SessionSummary,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                cancellation_type=ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                static_summary=f"{' / '.join(delegation.path)}: {clip(start['message'], 200)}",
            )
        except Exception as error:  # the id is taken by a running workflow, or the start failed
            self.checks.history_moved_on()
            return f"Error: {tool} failed: the agent could not start ({clip(str(error), RECORDED_BYTES)})"
        self.checks.history_moved_on()  # the child's start is an event
        self.session.run_state.children.append(child_id)
        # Not in a `finally`: a run evicted from the worker's cache closes this coroutine, and no
        # workflow code may run then. A session cancelled meanwhile lists no child (children_pending).
        answer = await self.child_answer(tool, child, child_id)
        self.children.child_finished(child_id)
        return answer

    async def child_answer(self, tool: str, child: Any, child_id: str) -> str:
        await workflow.wait_condition(lambda: child.done() or self.session.run_state.cancel_reason is not None)
        cancelled_here = not child.done()
        if cancelled_here:
            child.cancel()  # it settles its own pauses and closes; waited for (WAIT_CANCELLATION_COMPLETED)
        try:
            summary: SessionSummary = await child
        except (ChildWorkflowError, asyncio.CancelledError) as error:
            if isinstance(error, asyncio.CancelledError) and not cancelled_here:
                raise  # this session itself was cancelled through Temporal
            self.checks.history_moved_on()
            why = f"the session was cancelled ({self.session.run_state.cancel_reason})" if cancelled_here else \
                clip(str(error.cause or error) if isinstance(error, ChildWorkflowError) else str(error), RECORDED_BYTES)
            return f"Error: {tool} failed: {why}; see session {child_id}"
        self.checks.history_moved_on()
        if summary.reason != TASK_ANSWERED or summary.last_answer is None:
            return f"Error: {tool} did not answer: {summary.reason}; see session {child_id}"
        return summary.last_answer


def below(child: str, item: dict[str, Any]) -> bool:
    """An item a child may report: its own call or one of a session under it, with a call id unique in the tree."""
    session, call = item.get("session_id"), item.get("child_call_id")
    return (isinstance(session, str) and isinstance(call, str) and (session == child or session.startswith(f"{child}/"))
            and item.get("call_id") == f"{session}/{call}")


def within_audit_bounds(event: AuditEvent) -> AuditEvent:
    """A decision a child reports, held to the bounds of the session's own audit rows: anyone with
    Temporal access can signal under a child's id, so its texts are clipped as `record` clips them
    and its path goes no deeper than delegation does."""
    texts = {key: clip(value, AUDIT_TEXT_BYTES) for key, value in event.model_dump().items() if isinstance(value, str)}
    path = [clip(name, AUDIT_TEXT_BYTES) for name in event.path[:MAX_DEPTH]] if event.path is not None else None
    return event.model_copy(update={**texts, "path": path})


class ChildPausesTable:
    """A part of AgentWorkflow: what waits in the children, listed in `pending`; decisions forwarded.

    A child signals its parent (`child_pauses`) whenever what waits in it or below it changes,
    and the parent passes the news up in its own report: the root holds every pause of the tree.
    A table in the workflow, not clients asking each child, because the root's `pending` query is
    what every door reads (CLI, API, web, AG-UI, `wait_until_settled`), and a query cannot ask
    another workflow. What a report says is shown, never trusted: a decision about a child's call
    is forwarded to that child as it was sent (its `by` and its proof), and the child judges it by
    its own rules and its own open call. A proof is signed for one session id (workflows/proofs.py),
    so one signed for the root is refused by the child: it cannot be replayed against another
    session. Verified decisions about a child's call are signed for the child (its `session_id`).
    """

    def __init__(self, session: SessionRun, checks: LocalChecks, recorder: Recorder, reports: ChildReports) -> None:
        self.session = session
        self.checks = checks
        self.recorder = recorder
        self.reports = reports

    def take_report(self, payload: RawValue) -> None:
        """Taken only from a child this session started and still waits for, only if newer, and
        only about that child and the sessions below it (whose ids start with the child's)."""
        self.checks.history_moved_on()
        try:
            report = ChildPauses.model_validate(decoded(payload))
        except Exception:  # noqa: BLE001 (only sessions send it: a malformed one is nobody's report)
            return
        known = self.session.run_state.child_pauses.get(report.session_id)
        if report.session_id not in self.session.run_state.children or (known is not None and known.seq >= report.seq):
            return
        if not all(below(report.session_id, item) for item in report.items):
            return
        self.session.run_state.child_pauses[report.session_id] = report
        for event in report.decided:
            self.record_below(report.session_id, event)
        self.follow_children()

    def record_below(self, child: str, event: dict[str, Any]) -> None:
        """A decision a child reports, in this session's audit with the session it was made in: the
        root's audit says what was decided where (the child's own audit is the record of it)."""
        try:
            decided = AuditEvent.model_validate(event)
        except Exception:  # noqa: BLE001 (only sessions send it: a malformed one is nobody's)
            return
        session = decided.session_id or ""
        if decided.event in DECISIONS and (session == child or session.startswith(f"{child}/")) and \
                str(decided.call_id).startswith(f"{session}/"):
            self.session.run_state.audit.append(within_audit_bounds(decided) if self.session.behaviours.clips_child_reports else decided)

    def child_finished(self, child_id: str) -> None:
        """A closed child waits for nothing: its pauses were settled as it closed."""
        self.session.run_state.children = [child for child in self.session.run_state.children if child != child_id]
        if self.session.run_state.child_pauses.pop(child_id, None) is not None:
            self.follow_children()

    def follow_children(self) -> None:
        """While a call waits below, the session waits for people too (so `wait_until_settled`, the
        API's start and its messages answer then); once none does, it runs on."""
        if self.session.state == "closed":
            return
        if self.reports.children_pending() and self.session.state == "running":
            self.recorder.set_state("awaiting_human")
        elif not self.reports.children_pending() and self.session.state == "awaiting_human" and not self.session.run_state.pauses.open:
            self.recorder.set_state("running")
        else:
            self.recorder.publish()

    def refer_to_child(self, payload: Any) -> None:
        """Raises ForwardedToChild when the decision's call_id names a call that waits below."""
        if not self.session.run_state.child_pauses or not isinstance(payload, dict):
            return
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):  # no call below has any other
            return
        for child, report in self.session.run_state.child_pauses.items():
            for item in report.items:
                if item.get("call_id") == call_id:
                    raise ForwardedToChild(child, item["child_call_id"] if item.get("session_id") == child else call_id)

    def forward(self, verb: str, payload: dict[str, Any], forwarded: ForwardedToChild) -> dict[str, Any]:
        """The decision as it was sent, to the child it is about; the child judges it and audits it."""
        self.reports.send_to(forwarded.child, verb, {**payload, "call_id": forwarded.call_id})
        return {"accepted": True, "call_id": str(payload.get("call_id")), "outcome": "forwarded",
                "session_id": forwarded.child}
