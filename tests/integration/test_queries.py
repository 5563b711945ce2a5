"""hitl/client/queries.py: a session's query answered as the SDK answers it, and answered when
the server first refused it for a full query buffer (an Update's task in flight)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import QueryWorkflowRequest
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from hitl.client.queries import BUFFER_FULL, query_now
from tests.support.sessions import eventually
from tests.support.slow_update import Gate, SlowToAccept, held_by_the_test


async def raw_count(client: Client, session_id: str) -> str:
    """The server's own answer to one query, with no retry: "answered" or "refused" (the buffer full)."""
    request = QueryWorkflowRequest(namespace=client.namespace, execution=WorkflowExecution(workflow_id=session_id),
                                   query=WorkflowQuery(query_type="count", query_args=Payloads()))
    try:
        await client.workflow_service.query_workflow(request, retry=False)
    except RPCError as error:
        if error.status == RPCStatusCode.RESOURCE_EXHAUSTED and BUFFER_FULL in error.message:
            return "refused"
        raise
    return "answered"


async def the_buffer_held(client: Client, session_id: str) -> asyncio.Task[str] | None:
    """Two queries at once: while a workflow task is in flight the server keeps one (answered when
    the task is done) and refuses the other. The kept one, still waiting, once that happened."""
    pair = [asyncio.create_task(raw_count(client, session_id)) for _ in range(2)]
    done, waiting = await asyncio.wait(pair, return_when=asyncio.FIRST_COMPLETED)
    if [task.result() for task in done] == ["refused"] and waiting:
        return waiting.pop()
    await asyncio.gather(*pair)
    return None


async def test_a_query_refused_while_an_update_is_judged_is_answered_once_it_is(env: WorkflowEnvironment) -> None:
    client, queue = env.client, f"slow-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[SlowToAccept], activities=[held_by_the_test]):
        handle = await client.start_workflow(SlowToAccept.run, id=f"slow-{uuid.uuid4().hex[:8]}", task_queue=queue)
        assert await query_now(client, handle.id, "count") == 0
        for accepted in (1, 2):
            Gate.close()
            update = asyncio.create_task(handle.execute_update(SlowToAccept.accept))
            # While its local activity waits for the gate, the server keeps one query and turns the others away...
            kept = await eventually(lambda: the_buffer_held(client, handle.id), lambda task: task is not None,
                                    every=0.01)
            # ...these among them, each asked again until the Update's task is done: they see the Update.
            asked = asyncio.gather(*(query_now(client, handle.id, "count") for _ in range(3)))
            await asyncio.sleep(0.2)  # they are sent while the task is held (the answer is the same either way)
            Gate.open()
            assert await asked == [accepted] * 3
            assert await kept == "answered" and await update == accepted
        assert await handle.result() == 2


async def test_an_unknown_session_or_query_fails_as_the_sdk_fails_them(env: WorkflowEnvironment) -> None:
    client, queue = env.client, f"slow-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[SlowToAccept]):
        handle = await client.start_workflow(SlowToAccept.run, id=f"slow-{uuid.uuid4().hex[:8]}", task_queue=queue)
        with pytest.raises(WorkflowQueryFailedError) as unknown_query:
            await query_now(client, handle.id, "no_such_query", {"after": 0})
        with pytest.raises(WorkflowQueryFailedError) as as_the_sdk:
            await handle.query("no_such_query", {"after": 0})
        assert str(unknown_query.value) == str(as_the_sdk.value)
        await handle.terminate("done")
    with pytest.raises(RPCError) as unknown_session:
        await query_now(client, f"none-{uuid.uuid4().hex[:8]}", "count")
    assert unknown_session.value.status == RPCStatusCode.NOT_FOUND


async def test_with_the_retry_turned_off_a_query_is_the_sdks_own_call(env: WorkflowEnvironment,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """HITL_QUERY_BUFFER_RETRY=off: the way out the day the SDK changes what query_now relies on."""
    client, queue = env.client, f"slow-{uuid.uuid4().hex[:8]}"
    sent_by_the_sdk: list[str] = []
    sdks_query = WorkflowHandle.query

    async def noted(self: WorkflowHandle, query: str, *args: Any, **kwargs: Any) -> Any:
        sent_by_the_sdk.append(query)
        return await sdks_query(self, query, *args, **kwargs)

    monkeypatch.setattr(WorkflowHandle, "query", noted)
    async with Worker(client, task_queue=queue, workflows=[SlowToAccept]):
        handle = await client.start_workflow(SlowToAccept.run, id=f"slow-{uuid.uuid4().hex[:8]}", task_queue=queue)
        monkeypatch.setenv("HITL_QUERY_BUFFER_RETRY", "off")
        assert await query_now(client, handle.id, "count") == 0
        assert sent_by_the_sdk == ["count"]
        monkeypatch.setenv("HITL_QUERY_BUFFER_RETRY", "on")
        assert await query_now(client, handle.id, "count") == 0
        assert sent_by_the_sdk == ["count"], "on, query_now sends its own request"
        await handle.terminate("done")
