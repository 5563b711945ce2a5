"""The sandbox runner that answers serialization-context asks outside the sandbox
(hitl/sandbox_runner.py): used only where the context cannot matter, and otherwise the
SDK's sandboxed instance in every respect."""

from __future__ import annotations

import base64
import dataclasses
from typing import Sequence

import pytest
import temporalio.converter
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext
from temporalio.worker import UnsandboxedWorkflowRunner, WorkflowInstance
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from hitl.sandbox_runner import ANSWERED, ContextFreeSandbox, _ContextFree, fits_this_sdk, ignores_context
from hitl.settings import DATA_CONVERTER, data_converter
from hitl.plugin import SANDBOX, workflow_runner
from tests.support.workflow_instances import agent_run_details

pytestmark = pytest.mark.unit


class PerWorkflowKeys(PayloadCodec, WithSerializationContext):
    """A codec that reads its context (a key per workflow, say): the case the SDK's runner is for."""

    def __init__(self, workflow_id: str | None = None) -> None:
        self.workflow_id = workflow_id

    def with_context(self, context: SerializationContext) -> "PerWorkflowKeys":
        return PerWorkflowKeys(getattr(context, "workflow_id", None))

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


ENCRYPTED = data_converter(base64.b64encode(bytes(32)).decode())
CONTEXT_AWARE = dataclasses.replace(DATA_CONVERTER, payload_codec=PerWorkflowKeys())


def test_the_products_converters_read_no_context_and_a_context_aware_codec_does() -> None:
    assert ignores_context(DATA_CONVERTER)
    assert ignores_context(ENCRYPTED)
    assert ignores_context(temporalio.converter.DataConverter.default)
    assert not ignores_context(CONTEXT_AWARE)


def test_the_worker_answers_outside_the_sandbox_only_where_no_converter_reads_the_answer() -> None:
    assert type(workflow_runner(DATA_CONVERTER)) is ContextFreeSandbox
    assert type(workflow_runner(ENCRYPTED)) is ContextFreeSandbox
    assert type(workflow_runner(CONTEXT_AWARE)) is SandboxedWorkflowRunner
    assert type(workflow_runner(DATA_CONVERTER, sandbox=False)) is UnsandboxedWorkflowRunner


def test_the_operator_turns_the_context_free_sandbox_off_with_one_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_CONTEXT_FREE_SANDBOX", "off")
    assert type(workflow_runner(DATA_CONVERTER)) is SandboxedWorkflowRunner
    monkeypatch.setenv("HITL_CONTEXT_FREE_SANDBOX", "on")
    assert type(workflow_runner(DATA_CONVERTER)) is ContextFreeSandbox


def test_every_method_of_a_workflow_instance_is_answered_by_the_wrapper_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A method the SDK adds to WorkflowInstance must not fall back to the base class's default
    in the wrapper: the worker then keeps the SDK's own runner."""
    assert fits_this_sdk()
    assert ANSWERED <= set(vars(_ContextFree))
    monkeypatch.setattr(WorkflowInstance, "a_later_sdks_method", lambda self: None, raising=False)
    assert not fits_this_sdk()
    assert type(workflow_runner(DATA_CONVERTER)) is SandboxedWorkflowRunner


async def test_the_instance_is_the_sdks_sandboxed_one_but_for_the_context_asks() -> None:
    sdk = SandboxedWorkflowRunner(restrictions=SANDBOX).create_instance(agent_run_details())
    ours = ContextFreeSandbox(restrictions=SANDBOX).create_instance(agent_run_details())
    assert isinstance(ours, _ContextFree) and type(ours.sandboxed) is type(sdk)
    assert ours.get_info() == sdk.get_info()
    assert ours.get_thread_id() == sdk.get_thread_id()
    assert sdk.get_serialization_context(None) is not None  # the SDK's answer, made inside the sandbox
    assert ours.get_serialization_context(None) is None  # "none": the SDK then uses the worker's converter as it is
    assert ours.get_external_store_context(None).target is None
