"""The tests' Temporal client sends a `busy` Update again, as every client of a session does.

A run refuses Updates with the code `busy` while a local activity's result is on its way or
it hands over (workflows/inbound.py, refuse_while_busy); the API, the CLI and the terminal send
them again (hitl/client/updates.py). Tests that call `handle.execute_update` directly would
otherwise fail on a refusal that means "a moment later", which a worker replaying every task
on a busy machine meets more often. Any other refusal is the test's to see, at once.

The product's own clients under test (the API) get a client without it (`without_patience`),
so that their own retry of `busy` is what the tests exercise.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)

from hitl.client.refusals import code_of
from hitl.client.updates import ATTEMPTS, FIRST_DELAY_SECONDS


class PatientUpdates(Interceptor):
    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next)


class _Outbound(OutboundInterceptor):
    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle[Any]:
        if input.wait_for_stage != WorkflowUpdateStage.COMPLETED:
            return await super().start_workflow_update(input)
        input.update_id = input.update_id or f"{input.update}-{uuid.uuid4().hex}"
        delay = FIRST_DELAY_SECONDS
        for attempt in range(1, ATTEMPTS + 1):
            handle = await super().start_workflow_update(input)
            try:
                await handle.result()  # known already: the call waited for the outcome
            except WorkflowUpdateFailedError as error:
                if attempt < ATTEMPTS and code_of(error) == "busy":
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
            return handle
        raise AssertionError("unreachable")


def without_patience(client: Client) -> Client:
    """The same connection, converter, namespace and interceptors (tracing among them), without
    the tests' patience."""
    config = client.config()
    interceptors = [interceptor for interceptor in config["interceptors"] if not isinstance(interceptor, PatientUpdates)]
    return Client(client.service_client, namespace=client.namespace, data_converter=client.data_converter,
                  interceptors=interceptors)
