"""A Replayer set up as the worker runs the workflow: both take HitlPlugin (hitl/plugin.py), so
the sandbox with its passthrough list, the product's data converter and the interceptors are the
worker's. A replay set up otherwise could pass where the worker would fail, or the other way round."""

from __future__ import annotations

from temporalio.worker import Replayer, WorkflowRunner

from hitl.plugin import HitlPlugin


def worker_replayer(runner: WorkflowRunner | None = None) -> Replayer:
    """`runner`: the worker's sandboxed runner unless given (one that logs, say)."""
    return Replayer(workflows=[], plugins=[HitlPlugin(runner=runner)])
