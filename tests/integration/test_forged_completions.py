"""An activity completed by someone else, with a payload that is not its result, is a failed call.

Anyone who reaches the Temporal frontend can complete or fail an activity by its id, with any payload.
Before the fix the SDK read the model's and the tools' results as their types while it applied
the workflow activation, outside the workflow's code: a payload that is not a `ModelReply` (plain
JSON will do) or one sealed under a key id the worker lacks failed the workflow task on every
retry, and the session was stranded. Now the workflow reads each result itself
(workflows/activity_calls.py, read_result): the model call or the tool failed, the loop says so
and goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.model import heartbeating
from activities.offline_model import OfflineModel
from activities.run_tool import ToolActivities
from hitl.encryption import ENCODING, KEY_ID_METADATA
from hitl.settings import data_converter
from hitl.worker import build_worker
from tests.integration.test_sealed_signals import SendAsGiven
from tests.support.session_health import assert_no_failed_workflow_task
from tests.support.sessions import eventually, query
from tests.support.stack import new_key
from workflows.agent import AgentWorkflow
from workflows.contract import RUN_TOOL

FORGED: dict[str, Payload | None] = {
    # sealed under a key id the worker does not hold: the codec hands it on unreadable
    "unknown key": Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: b"nobody-holds-this"}, data=os.urandom(64)),
    # no encryption trick at all: JSON that is neither a model reply nor a tool's text
    "wrong shape": Payload(metadata={"encoding": b"json/plain"}, data=b'{"tool_calls": "not a list"}'),
    # completed with no payload at all
    "nothing": None,
    # a lone surrogate, escaped as JSON allows and as UTF-8 forbids
    "lone surrogate": Payload(metadata={"encoding": b"json/plain"}, data=b'{"content": "\\ud800", "tool_calls": []}'),
    # bytes that are not UTF-8 (a surrogate encoded), read by the SDK as bytes whatever the type
    "ill-formed bytes": Payload(metadata={"encoding": b"binary/plain"}, data=b"\xed\xa0\x80"),
    # the SDK's encoding of None, whatever the type
    "null": Payload(metadata={"encoding": b"binary/null"}),
}


class StallsOnce:
    """The offline model, except that its first call never answers (it heartbeats meanwhile)."""

    description = "stalls once, then the offline model"

    def __init__(self) -> None:
        self.calls = 0
        self.model = OfflineModel()

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            async with heartbeating():
                await asyncio.Event().wait()
        return await self.model.complete(request)


class StallingTools(ToolActivities):
    """Every tool call waits for ever (heartbeating), so only a forged completion ends it."""

    @activity.defn(name=RUN_TOOL.name)
    async def run_tool(self, invocation: Any) -> str:
        async with heartbeating():
            await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def clients(env: WorkflowEnvironment) -> tuple[Client, Client]:
    """A client that seals with a fresh key, and one that sends payloads as given (the forger)."""
    converter = data_converter(new_key())
    target = env.client.service_client.config.target_host
    sealed = await Client.connect(target, data_converter=converter)
    forger = await Client.connect(target, data_converter=dataclasses.replace(
        converter, payload_codec=SendAsGiven(converter.payload_codec)))
    return sealed, forger


async def pending_activity(handle: WorkflowHandle[Any, Any], activity_type: str) -> str | None:
    pending = (await handle.describe()).raw_description.pending_activities
    return next((a.activity_id for a in pending if a.activity_type.name == activity_type), None)


async def forge_completion(forger: Client, handle: WorkflowHandle[Any, Any], activity_type: str, how: str) -> None:
    activity_id = await eventually(lambda: pending_activity(handle, activity_type), lambda found: found is not None)
    forged = forger.get_async_activity_handle(workflow_id=handle.id, run_id=None, activity_id=activity_id)
    if how == "failure details":
        # a failure whose details no converter reads (hitl/failure_converter.py)
        await forged.fail(ApplicationError("forged", RawValue(Payload(metadata={"encoding": b"binary/whatever"})),
                                           non_retryable=True))
    elif FORGED[how] is None:
        await forged.complete()
    else:
        await forged.complete(RawValue(FORGED[how]))


@pytest.mark.parametrize("how", [*sorted(FORGED), "failure details"])
async def test_a_forged_model_completion_fails_the_model_call_and_the_session_goes_on(
        env: WorkflowEnvironment, workspace: Path, how: str) -> None:
    sealed, forger = await clients(env)
    task_queue = f"forged-{uuid.uuid4().hex[:8]}"
    async with build_worker(sealed, task_queue, StallsOnce(), workspace):
        handle = await sealed.start_workflow(AgentWorkflow.run, {"message": "hello"},
                                             id=f"forged-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
        await forge_completion(forger, handle, "call_model", how)
        status = await eventually(lambda: query(handle, "status"), lambda s: s["state"] == "idle")
        expected = "model call failed: forged" if how == "failure details" else "model call failed: its result could not be read"
        assert expected in status["error"], status
        await handle.signal("user_message", {"text": "search for milk"})
        status = await eventually(lambda: query(handle, "status"), lambda s: s["state"] == "idle" and s["turn"] == 2)
        assert status["error"] is None and status["last_answer"], status
        await assert_no_failed_workflow_task(handle)


@pytest.mark.parametrize("how", [*sorted(FORGED), "failure details"])
async def test_a_forged_tool_completion_is_an_error_the_model_reads(
        env: WorkflowEnvironment, workspace: Path, how: str) -> None:
    sealed, forger = await clients(env)
    task_queue = f"forged-{uuid.uuid4().hex[:8]}"
    async with build_worker(sealed, task_queue, OfflineModel(), workspace, tools=StallingTools(workspace)):
        handle = await sealed.start_workflow(AgentWorkflow.run, {"message": "search for milk"},
                                             id=f"forged-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
        await forge_completion(forger, handle, "run_tool", how)
        await eventually(lambda: query(handle, "status"), lambda s: s["state"] == "idle")
        results = [m["content"] for m in await query(handle, "transcript") if m["role"] == "tool"]
        expected = "failed: forged" if how == "failure details" else "its result could not be read"
        assert len(results) == 1 and expected in results[0], results
        await assert_no_failed_workflow_task(handle)


async def test_a_forged_reply_whose_arguments_escape_a_lone_surrogate_ends_the_turn_with_a_reason(
        env: WorkflowEnvironment, workspace: Path) -> None:
    """The reply reads (its JSON escapes the escape), but the arguments the planner would parse from
    it hold a lone surrogate: before the fix the turn stopped on an internal error as the pause's
    arguments were hashed; now the model call failed, as for any unreadable reply."""
    arguments = json.dumps({"query": "milk \ud800"})  # the text holds the escape `\ud800`, as JSON allows
    reply = json.dumps({"content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "search_web", "arguments": arguments}}]}).encode()
    sealed, forger = await clients(env)
    task_queue = f"forged-{uuid.uuid4().hex[:8]}"
    async with build_worker(sealed, task_queue, StallsOnce(), workspace):
        handle = await sealed.start_workflow(AgentWorkflow.run, {"message": "hello"},
                                             id=f"forged-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
        activity_id = await eventually(lambda: pending_activity(handle, "call_model"), lambda found: found is not None)
        await forger.get_async_activity_handle(workflow_id=handle.id, run_id=None, activity_id=activity_id).complete(
            RawValue(Payload(metadata={"encoding": b"json/plain"}, data=reply)))
        status = await eventually(lambda: query(handle, "status"), lambda s: s["state"] == "idle")
        assert "model call failed: its result could not be read" in status["error"], status
        assert "lone surrogate" in status["error"], status
        await assert_no_failed_workflow_task(handle)
