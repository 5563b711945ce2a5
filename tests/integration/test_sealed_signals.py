"""A payload the worker's codec cannot open is refused by the session, not a task that fails for ever.

The SDK decodes a workflow activation whole: before the fix, one signal sealed under a key id
the worker does not hold (or altered on the way) made the codec raise, and every retry of that
workflow task failed the same way, so the paused call could never be decided again. Anyone who
reaches the frontend can send such a signal; the session must record it as refused and go on.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import Any, Sequence

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.converter import PayloadCodec
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.encryption import ENCODING, KEY_ID_METADATA
from hitl.settings import data_converter
from hitl.worker import build_worker
from tests.support.session_health import assert_no_failed_workflow_task
from tests.support.sessions import eventually, pending_items, query, settled
from tests.support.stack import new_key
from workflows.agent import AgentWorkflow

FORGED = {
    "unknown key": Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: b"nobody-holds-this"}, data=os.urandom(64)),
    "altered": None,  # sealed under the session's key, then one byte changed (made in the test)
}


@pytest.mark.parametrize("how", sorted(FORGED))
async def test_a_signal_the_worker_cannot_open_is_refused_and_the_call_still_decided(
        env: WorkflowEnvironment, workspace: Path, how: str) -> None:
    converter = data_converter(new_key())
    sealed_client = await Client.connect(env.client.service_client.config.target_host, data_converter=converter)
    # Sends payloads as given (the forged bytes reach the worker untouched), reads answers with the key.
    raw_client = await Client.connect(env.client.service_client.config.target_host, data_converter=dataclasses.replace(
        converter, payload_codec=SendAsGiven(converter.payload_codec)))
    task_queue = f"sealed-{uuid.uuid4().hex[:8]}"
    async with build_worker(sealed_client, task_queue, OfflineModel(), workspace):
        handle = await sealed_client.start_workflow(AgentWorkflow.run, {"message": "please delete notes.txt"},
                                                    id=f"sealed-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
        [item] = await pending_items(handle)
        forged = FORGED[how] or await altered(converter, {"by": "mallory"})
        raw = raw_client.get_workflow_handle(handle.id)
        await raw.signal("approve", RawValue(forged))
        status: dict[str, Any] = await eventually(lambda: query(handle, "status"), lambda s: s["ignored_signals"])
        [ignored] = status["ignored_signals"]
        assert ignored["signal"] == "approve" and "unreadable payload" in ignored["reason"], ignored
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await raw.execute_update("approve_update", RawValue(forged))
        assert "unreadable payload" in str(refused.value.cause)
        await assert_no_failed_workflow_task(handle)
        await handle.signal("approve", {"call_id": item["call_id"], "by": "ana"})
        final = await settled(handle)
    assert final["last_answer"] == "Deleted notes.txt." and not (workspace / "notes.txt").exists()


class SendAsGiven(PayloadCodec):
    """A client's codec that encodes nothing and decodes with the session's key."""

    def __init__(self, reading: PayloadCodec) -> None:
        self.reading = reading

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.reading.decode(payloads)


async def altered(converter: Any, value: Any) -> Payload:
    [payload] = await converter.encode([value])
    data = bytearray(payload.data)
    data[-1] ^= 1
    return Payload(metadata=dict(payload.metadata), data=bytes(data))
