"""A session's query without a second's wait for a full query buffer.

A query that reaches the server while a session's workflow task is in flight is
buffered until the task completes; while an Update's speculative task runs, the
buffer takes none, and the server answers RESOURCE_EXHAUSTED ("consistent
query buffer is full"). The SDK's client retries that as throttling, after a
second (sdk-core's throttle backoff, which its RetryConfig does not set), though
the task it waited for takes a few milliseconds. Readers that query while
people decide (the event feeds, AG-UI's runs, the API's reads) met it as a
second of silence after some decisions and not others. Here that one answer is
asked again within milliseconds; everything else is the SDK's own call, its
retries and errors included.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Protocol

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import QueryWorkflowRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError, RPCStatusCode

from hitl.client.workers import NO_RECENT_POLLER
from hitl.sdk_shortcuts import QUERY_BUFFER_RETRY, enabled

BUFFER_FULL = "consistent query buffer is full"
FIRST_PAUSE, LONGEST_PAUSE = 0.005, 0.1
RPC = timedelta(seconds=10)


class Ask(Protocol):
    """How a reader sends a session's query: `query_now`, or a test's scripted session."""

    async def __call__(self, client: Client, session_id: str, name: str, arg: Any = None, *,
                      rpc_timeout: timedelta = RPC) -> Any: ...


async def query_now(client: Client, session_id: str, name: str, arg: Any = None, *, rpc_timeout: timedelta = RPC) -> Any:
    """`client.get_workflow_handle(session_id).query(name, arg)`, the newest run's answer, asked
    again at once while the server's query buffer is full (unless HITL_QUERY_BUFFER_RETRY is off)."""
    if not enabled(QUERY_BUFFER_RETRY):
        return await sdk_query(client, session_id, name, arg, rpc_timeout)
    request = QueryWorkflowRequest(namespace=client.namespace, execution=WorkflowExecution(workflow_id=session_id),
                                   query=WorkflowQuery(query_type=name))
    if arg is not None:
        request.query.query_args.payloads.extend(await client.data_converter.encode([arg]))
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + rpc_timeout.total_seconds(), FIRST_PAUSE
    while True:
        try:
            left = timedelta(seconds=max(deadline - loop.time(), 0.001))
            response = await client.workflow_service.query_workflow(request, retry=False, timeout=left)
            break
        except RPCError as error:
            if error.status == RPCStatusCode.RESOURCE_EXHAUSTED and BUFFER_FULL in error.message \
                    and loop.time() + pause < deadline:
                await asyncio.sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE)
                continue
            if error.status == RPCStatusCode.INVALID_ARGUMENT:  # as the SDK reads it: the query failed
                raise WorkflowQueryFailedError(error.message) from None
            if NO_RECENT_POLLER in error.message:  # asked again, it fails again: the caller names the missing worker
                raise
            return await sdk_query(client, session_id, name, arg, rpc_timeout)  # anything else: the SDK's, retries and all
    if response.HasField("query_rejected"):
        status = response.query_rejected.status
        raise WorkflowQueryRejectedError(WorkflowExecutionStatus(status) if status else None)
    if not response.query_result.payloads:
        return None
    return (await client.data_converter.decode(response.query_result.payloads))[0]


async def sdk_query(client: Client, session_id: str, name: str, arg: Any, rpc_timeout: timedelta) -> Any:
    handle = client.get_workflow_handle(session_id)
    return await (handle.query(name, rpc_timeout=rpc_timeout) if arg is None
                  else handle.query(name, arg, rpc_timeout=rpc_timeout))
