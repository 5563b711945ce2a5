"""What a worker hands its workflow runner for a new AgentWorkflow run, built as the SDK's own
tests build it: for a test or a benchmark that creates an instance without a worker."""

from __future__ import annotations

import temporalio.converter
import temporalio.workflow
from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.worker import WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox._runner import _fake_info

from workflows.agent import AgentWorkflow


def agent_run_details() -> WorkflowInstanceDetails:
    """The details of a new AgentWorkflow run (the SDK's own test values)."""
    default = temporalio.converter.DataConverter.default
    return WorkflowInstanceDetails(
        payload_converter_factory=default._new_payload_converter, failure_converter_class=default.failure_converter_class,
        interceptor_classes=[], defn=temporalio.workflow._Definition.must_from_class(AgentWorkflow), info=_fake_info,
        randomness_seed=-1, extern_functions={}, disable_eager_activity_execution=False,
        worker_level_failure_exception_types=[], patch_activation_callback=None,
        last_completion_result=Payloads(), last_failure=Failure(),
    )
