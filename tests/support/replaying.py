"""A Replayer set up as the worker runs the workflow: both take HitlPlugin (hitl/plugin.py), so
the sandbox with its passthrough list, the product's data converter and the interceptors are the
worker's. A replay set up otherwise could pass where the worker would fail, or the other way round."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, WorkflowRunner

from hitl.plugin import HitlPlugin


def worker_replayer(runner: WorkflowRunner | None = None) -> Replayer:
    """`runner`: the worker's sandboxed runner unless given (one that logs, say)."""
    return Replayer(workflows=[], plugins=[HitlPlugin(runner=runner)])


def ran_a_task(history: WorkflowHistory) -> bool:
    """Whether a worker completed a workflow task of this run. A run a hand-over has only just
    begun (its history `WorkflowExecutionStarted` alone) holds nothing to replay, and the SDK's
    replayer waits for its first task for ever."""
    return any(event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for event in history.events)
