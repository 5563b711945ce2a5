"""The workflow sandbox, entered once per activation instead of once per payload as well.

Before the SDK encodes or decodes a payload of an activation or of its completion (three
visitor passes each way), it asks the workflow instance for that payload's serialization
context (temporalio/worker/_workflow.py, `_CommandAwareDataConverter._get_current_dc`). The
sandboxed instance answers every such ask by entering the sandbox: compiling a code string,
swapping `sys.modules`, `__import__` and five builtins in and out. A step of a session has a
handful of payloads (the activity's input, its UI summary, its result, the query's answer),
so the sandbox is entered several times a step for questions whose answers change nothing
here: a context only reaches converters and codecs that read it, and ours read none.

`ContextFreeSandbox` runs the workflow exactly as `SandboxedWorkflowRunner` does (it is one,
so the SDK's debug mode still relaxes it) and answers those asks outside the sandbox with
"no context", which the SDK serves with the worker's own data converter. The worker uses it
only when `ignores_context` holds for its data converter and the SDK's instance interface is
the one it wraps (`fits_this_sdk`): with a context-aware converter or
codec (per-workflow keys, say), or external storage, it keeps the SDK's runner, which hands
each payload its own context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    SerializationContext,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

if TYPE_CHECKING:
    from temporalio.converter import StorageDriverStoreContext

# What a WorkflowInstance does, as of the SDK this was written for (temporalio 1.35).
ANSWERED = frozenset({"activate", "get_info", "get_thread_id", "get_serialization_context", "get_external_store_context"})

_PROBES: tuple[SerializationContext, ...] = (
    WorkflowSerializationContext(namespace="probe", workflow_id="probe"),
    ActivitySerializationContext(
        namespace="probe", activity_id="probe", activity_type="probe", activity_task_queue="probe",
        workflow_id="probe", workflow_type="probe", is_local=False,
    ),
)


def ignores_context(converter: DataConverter) -> bool:
    """Whether every payload of a workflow is converted and encoded the same whatever its context:
    no external storage, and no component that makes itself anew for a context."""
    return getattr(converter, "external_storage", None) is None and all(converter.with_context(probe) is converter for probe in _PROBES)


def fits_this_sdk() -> bool:
    """Whether the SDK's WorkflowInstance has exactly the methods `_ContextFree` answers. An SDK
    that adds one gets its own runner rather than a wrapper that would not pass the call on."""
    return frozenset(name for name, value in vars(WorkflowInstance).items()
                     if callable(value) and not name.startswith("_")) == ANSWERED


class ContextFreeSandbox(SandboxedWorkflowRunner):
    """`SandboxedWorkflowRunner` whose instances answer serialization-context asks without
    entering the sandbox. Use only with a converter that `ignores_context`."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _ContextFree(super().create_instance(det))


class _ContextFree(WorkflowInstance):
    """The sandboxed instance, but for the two context asks. Every method of WorkflowInstance is
    here (tests/unit/test_sandbox_runner.py checks it), so none falls back to the base's default."""

    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self.sandboxed = sandboxed

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self.sandboxed.activate(act)

    def get_info(self) -> workflow.Info:
        return self.sandboxed.get_info()

    def get_thread_id(self) -> int | None:  # the deadlock detector's: the thread running the workflow
        return self.sandboxed.get_thread_id()

    # `command_info` is the SDK's private CommandInfo: unread here, so typed as anything (a wider
    # parameter than the base's is a sound override) rather than imported from a private module.
    def get_serialization_context(self, command_info: object) -> SerializationContext | None:
        return None  # the SDK then uses the worker's converter as it is: the same, context or not

    def get_external_store_context(self, command_info: object) -> StorageDriverStoreContext:
        from temporalio.converter import StorageDriverStoreContext  # as new as this method
        return StorageDriverStoreContext(target=None)  # unread: no external storage (ignores_context)
