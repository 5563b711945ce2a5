"""A Replayer set up as the worker runs the workflow (hitl/worker.py): the sandbox with its
passthrough list, the product's data converter and its interceptors. A replay set up otherwise
could pass where the worker would fail, or the other way round."""

from __future__ import annotations

from temporalio.worker import Replayer, WorkflowRunner

from hitl.settings import DATA_CONVERTER
from hitl.worker import workflow_runner
from workflows.agent import AgentWorkflow
from workflows.arity import OneArgument


def worker_replayer(runner: WorkflowRunner | None = None) -> Replayer:
    """`runner`: the worker's sandboxed runner unless given (one that logs, say)."""
    return Replayer(
        workflows=[AgentWorkflow], data_converter=DATA_CONVERTER,
        workflow_runner=runner or workflow_runner(DATA_CONVERTER),
        interceptors=[OneArgument()],  # as the worker has it (worker.py)
    )
