"""Reading the conversation a model call needs from the session itself.

The workflow hands the model activity a `ConversationRef` (session, run,
message count, hash of that prefix) instead of the messages, and the activity
asks the workflow for them through the `model_context` query; a run's first call
carries them when they are few (`carried_request`), since no worker has them yet. Queries are not
recorded, so a turn of a thousand steps stores each message in the history
once, not a thousand times; and no store beside Temporal is needed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.conversation_cache import chain_after
from hitl.catalog import CATALOG
from workflows.contract import MODEL_CONTEXT
from workflows.conversation import ChatMessage
from workflows.requests import ConversationRef, ModelRequest

QUERY_TIMEOUT = timedelta(seconds=30)
# The server holds one query per workflow while a workflow task is in flight and refuses the
# next at once ("consistent query buffer is full"); a worker that replays every task, or one on
# a busy machine, can also take longer than a query's deadline to answer. Neither says anything
# about the model, so both are waited out here, for up to a minute, rather than spent from the
# model call's attempts (activities/model.py, MODEL_ATTEMPTS). Before, only the buffer was waited
# out, for about 6 s.
BUFFER_FULL = "consistent query buffer is full"
TRANSIENT = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)
PATIENCE_SECONDS = 60.0
FIRST_WAIT_SECONDS, LONGEST_WAIT_SECONDS = 0.05, 2.0
clock, sleep = time.monotonic, asyncio.sleep  # replaced in tests
logger = logging.getLogger(__name__)


def is_transient(error: RPCError) -> bool:
    return BUFFER_FULL in error.message or error.status in TRANSIENT


def carried_request(reference: ConversationRef) -> ModelRequest | None:
    """The request a run's first call carries (workflows/requests.py, OpeningMessages), with the tools
    as this worker's catalog has them now; None when it carries none, or messages whose hash chain
    does not end where the reference says (then the query is asked, as for any other call)."""
    opening = reference.opening
    if opening is None or len(opening.messages) != reference.message_count \
            or chain_after("", opening.messages) != reference.prefix_sha256:
        return None
    return ModelRequest(messages=[ChatMessage(role="system", content=opening.system), *opening.messages],
                        tools=[spec.openai_schema() for spec in CATALOG.select(opening.tools)], model=reference.model)


async def read_model_request(client: Client, reference: ConversationRef) -> ModelRequest:
    """The request the reference names; a stale reference is final, a busy server or worker is
    waited out (and said once in the worker's log, so a long wait is explained). A query that
    the workflow failed (its handler raised, an old worker without the query) is no busy
    server: it fails the attempt at once."""
    handle = client.get_workflow_handle(reference.session_id, run_id=reference.run_id)
    deadline = clock() + PATIENCE_SECONDS
    wait = FIRST_WAIT_SECONDS
    said: set[str] = set()
    try:
        while True:
            try:
                return await handle.query(
                    MODEL_CONTEXT.name, reference, result_type=MODEL_CONTEXT.result, rpc_timeout=QUERY_TIMEOUT
                )
            except RPCError as error:
                if not is_transient(error) or clock() + wait > deadline:
                    raise
                if error.message not in said:
                    said.add(error.message)
                    logger.warning("reading the conversation of %s waits: %s", reference.session_id, error.message)
            await sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT_SECONDS)
    except WorkflowQueryFailedError as error:
        if "stale reference" in str(error):
            raise ApplicationError(str(error), type="StaleConversation", non_retryable=True) from None
        raise ApplicationError(f"could not read the conversation: {error}", type="ConversationUnavailable") from None
    except RPCError as error:
        raise ApplicationError(f"could not read the conversation: {error.message}", type="ConversationUnavailable") from None
