"""A workflow that is not this product's, handing an AgentWorkflow forged state.

Anyone who reaches the Temporal frontend can run a worker of their own with a workflow that
continues as new into `AgentWorkflow` on the product's task queue, with any start input,
`carried` included; the new run's `continued_run_id` is then set, as a real hand-over's is.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from workflows.contract import WORKFLOW


@workflow.defn(name="ForgedHandOver")
class ForgedHandOver:
    @workflow.run
    async def run(self, task_queue: str, session_input: dict[str, Any]) -> None:
        workflow.continue_as_new(args=[session_input], workflow=WORKFLOW, task_queue=task_queue)


@workflow.defn(name=WORKFLOW)
class ImpostorAgent:
    """Named as the product's workflow, but served by the forger's worker on its own queue."""

    @workflow.run
    async def run(self, task_queue: str, session_input: dict[str, Any]) -> None:
        workflow.continue_as_new(args=[session_input], workflow=WORKFLOW, task_queue=task_queue)
