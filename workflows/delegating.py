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
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowCancellationType, ParentClosePolicy

from workflows.agents import AgentSpec, Delegation, agent_of, child_input, delegate_tool, merged, offered_agents
from workflows.contract import WORKFLOW
from workflows.limits import RECORDED_BYTES, clip
from workflows.session import DEFAULT_SYSTEM_PROMPT, SessionSummary

# The reason a child closes with once it has answered its task.
TASK_ANSWERED = "answered its task"


class Delegating:
    """Mixed into AgentWorkflow: the agents it may delegate to, and each delegation."""

    agents: dict[str, AgentSpec]

    def depth(self) -> int:
        return len(self.config.delegated.path) if self.config.delegated else 0

    def delegates(self) -> dict[str, AgentSpec]:
        """The agents this session offers the model, by their delegate tool's name."""
        return {delegate_tool(name): self.agents[name]
                for name in offered_agents(self.agents, self.config.tools, self.depth())}

    def learn_agents(self, operator: dict[str, AgentSpec]) -> None:
        """This run's agents: the operator's and the session's, or, in a child, its parent's table.
        A session that says it is a child is refused unless Temporal says that parent started it."""
        delegated = self.config.delegated
        if delegated is not None:
            parent = workflow.info().parent
            if parent is None or parent.workflow_id != delegated.parent:
                raise ApplicationError("invalid session input: delegated: only the parent session named there may "
                                       "start a child session", type="InvalidSessionInput", non_retryable=True)
            self.agents = dict(self.config.agents or {})
            return
        try:
            self.agents = merged(operator, self.config.agents)
        except ValueError as error:
            raise ApplicationError(f"invalid session input: {error}", type="InvalidSessionInput",
                                   non_retryable=True) from None

    def answered_its_task(self) -> bool:
        """A child closes once its one turn ended (not when it was cancelled: that closes as usual)."""
        if self.config.delegated is None or not self.run_state.turn or self.run_state.cancel_reason is not None:
            return False
        self.close(self.run_state.error or TASK_ANSWERED)
        return True

    async def delegate(self, tool: str, args: dict[str, Any]) -> str:
        """The child's final answer, or an error its parent's model reads."""
        name = agent_of(tool) or ""
        if name not in self.agents:
            return f"Error: {tool} failed: there is no agent named {name!r} any more"
        self.run_state.delegations += 1
        info = workflow.info()
        above = self.config.delegated
        delegation = Delegation(parent=info.workflow_id, root=above.root if above else info.workflow_id,
                                path=[*(above.path if above else []), name])
        start = child_input(self.config.model_dump(mode="json", exclude_none=True), self.agents, name,
                            str(args.get("task", "")), delegation, DEFAULT_SYSTEM_PROMPT)
        child_id = f"{info.workflow_id}/{name}/{self.run_state.delegations}"
        try:
            child = await workflow.start_child_workflow(
                WORKFLOW, start, id=child_id, task_queue=info.task_queue, result_type=SessionSummary,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                cancellation_type=ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                static_summary=f"{' / '.join(delegation.path)}: {clip(start['message'], 200)}",
            )
        except Exception as error:  # the id is taken by a running workflow, or the start failed
            self.history_moved_on()
            return f"Error: {tool} failed: the agent could not start ({clip(str(error), RECORDED_BYTES)})"
        self.history_moved_on()  # the child's start is an event
        await workflow.wait_condition(lambda: child.done() or self.run_state.cancel_reason is not None)
        cancelled_here = not child.done()
        if cancelled_here:
            child.cancel()  # it settles its own pauses and closes; waited for (WAIT_CANCELLATION_COMPLETED)
        try:
            summary: SessionSummary = await child
        except (ChildWorkflowError, asyncio.CancelledError) as error:
            if isinstance(error, asyncio.CancelledError) and not cancelled_here:
                raise  # this session itself was cancelled through Temporal
            self.history_moved_on()
            why = f"the session was cancelled ({self.run_state.cancel_reason})" if cancelled_here else \
                clip(str(error.cause or error) if isinstance(error, ChildWorkflowError) else str(error), RECORDED_BYTES)
            return f"Error: {tool} failed: {why}; see session {child_id}"
        self.history_moved_on()
        if summary.reason != TASK_ANSWERED or summary.last_answer is None:
            return f"Error: {tool} did not answer: {summary.reason}; see session {child_id}"
        return summary.last_answer
