"""Sending a validated Update the way every client of a session should.

The server aborts an in-flight Update with `WorkflowNotReady` ("... due to
unexpected workflow task failure") when the workflow task that carried it could
not be completed, for instance because an activity finished while the session
was closing (Temporal then fails the task as UnhandledCommand and retries it
without the Update). The Update was not applied, so sending it again with the
same id is safe, and it is what a person who clicked "approve" expects.

A run refuses every Update with the code `busy` for the moment a local
activity's result is on its way (workflows/inbound.py, refuse_while_busy):
nothing was applied either, and a moment later it takes it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.api.errordetails.v1 import WorkflowNotReadyFailure
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from hitl.client.refusals import code_of
from workflows.contract import Update

ATTEMPTS = 5
FIRST_DELAY_SECONDS = 0.2


def was_not_applied(error: RPCError) -> bool:
    """True for the server's WorkflowNotReady abort, which never applies the Update."""
    return any(detail.Is(WorkflowNotReadyFailure.DESCRIPTOR) for detail in error.grpc_status.details)


async def execute_update_retrying(
    handle: WorkflowHandle[Any, Any], update: Update[Any, Any], payload: Any, *, update_id: str | None = None,
    result_type: type | None = None,
) -> Any:
    """`handle.execute_update` of one of the contract's Updates (workflows/contract.py), sent again
    (same Update id) while the server or the session says it was not applied."""
    name = update.name
    update_id = update_id or f"{name}-{uuid.uuid4().hex}"
    delay = FIRST_DELAY_SECONDS
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return await handle.execute_update(name, payload, id=update_id, result_type=result_type)
        except RPCError as error:
            if attempt == ATTEMPTS or not was_not_applied(error):
                raise
        except WorkflowUpdateFailedError as error:
            if attempt == ATTEMPTS or code_of(error) != "busy":
                raise
        await asyncio.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")
