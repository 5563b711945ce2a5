"""Reading the conversation a model call needs from the session itself.

The workflow hands the model activity a `ConversationRef` (session, run,
message count, hash of that prefix) instead of the messages, and the activity
asks the workflow for them through the `model_context` query. Queries are not
recorded, so a turn of a thousand steps stores each message in the history
once, not a thousand times; and no store beside Temporal is needed.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from workflows.requests import ConversationRef, ModelRequest

QUERY_TIMEOUT = timedelta(seconds=30)


async def read_model_request(client: Client, reference: ConversationRef) -> ModelRequest:
    """The request the reference names; a stale reference is final, a busy server is retried."""
    handle = client.get_workflow_handle(reference.session_id, run_id=reference.run_id)
    try:
        return await handle.query(
            "model_context", reference, result_type=ModelRequest, rpc_timeout=QUERY_TIMEOUT
        )
    except WorkflowQueryFailedError as error:
        if "stale reference" in str(error):
            raise ApplicationError(str(error), type="StaleConversation", non_retryable=True) from None
        raise ApplicationError(f"could not read the conversation: {error}", type="ConversationUnavailable") from None
    except RPCError as error:
        raise ApplicationError(f"could not read the conversation: {error.message}", type="ConversationUnavailable") from None
