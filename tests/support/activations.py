"""A replay that shows its activations: which jobs the SDK handed the workflow together, and what
the workflow answered to each. Races between a workflow's own steps and the signals of the same
workflow task live in how those are split, which no query or history shows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import WorkflowHistory
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from hitl.plugin import SANDBOX
from tests.support.replaying import worker_replayer


@dataclass
class Activation:
    jobs: list[str]
    commands: list[str]
    continued_as_new_with: dict[str, Any] | None = None  # the next run's input, when this one handed over


@dataclass
class ActivationLog:
    activations: list[Activation] = field(default_factory=list)

    def record(self, activation: WorkflowActivation, completion: WorkflowActivationCompletion) -> None:
        commands = list(completion.successful.commands) if completion.HasField("successful") else []
        handed_over = [c.continue_as_new_workflow_execution for c in commands if c.HasField("continue_as_new_workflow_execution")]
        self.activations.append(Activation(
            jobs=[job.WhichOneof("variant") for job in activation.jobs],
            commands=[command.WhichOneof("variant") for command in commands],
            continued_as_new_with=json.loads(handed_over[0].arguments[0].data) if handed_over else None,
        ))

    def handed_over_with(self) -> dict[str, Any]:
        [carried] = [a.continued_as_new_with for a in self.activations if a.continued_as_new_with is not None]
        return carried


class _LoggingRunner(SandboxedWorkflowRunner):
    """The worker's sandboxed runner, each instance's activations written to a log."""

    def __init__(self, log: ActivationLog) -> None:
        super().__init__(restrictions=SANDBOX)
        self._log = log

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        instance = super().create_instance(det)
        activate = instance.activate

        def logged(act: WorkflowActivation) -> WorkflowActivationCompletion:
            completion = activate(act)
            self._log.record(act, completion)
            return completion

        instance.activate = logged  # type: ignore[method-assign]
        return instance


async def replay_logged(history: WorkflowHistory) -> ActivationLog:
    """Replay as the worker runs (sandboxed, its interceptors), failing on any nondeterminism."""
    log = ActivationLog()
    await worker_replayer(_LoggingRunner(log)).replay_workflow(history)
    return log
