"""Whether a worker polls a session's task queue.

A query is answered by a worker: with none polling, Temporal holds it until its
deadline and the SDK raises a bare "Timeout expired". Readers ask here first (two
cheap calls; a queue nobody polls is looked at again for a few seconds, as a worker
that is starting polls within moments) and say in one line what is missing
instead of waiting for nothing.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

# How the SDK reports a call that ran out of time ("Timeout expired", or the server's deadline).
TIMED_OUT = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)
# The server lists a stopped worker's pollers for minutes; a live one polls again within about a minute.
LIVE_SECONDS = 120
# What the server answers a query with once no worker has polled the queue for a while.
NO_RECENT_POLLER = "no poller seen for task queue recently"
GRACE_SECONDS, LOOK_AGAIN_SECONDS = 3.0, 0.5


class NoWorker(Exception):
    """No worker polls the task queue of the session a reader asked about; the message says what to start."""


# Each poller's last poll, as the server's clock tells it: identity -> time.
Polls = dict[str, datetime]


async def no_worker_line(client: Client, session_id: str, *, live_only: bool = False,
                         polls_before: Polls | None = None, polls_seen: Polls | None = None) -> str | None:
    """One line when no worker polls the session's task queue, else None (None too when the session
    or its queue cannot be described: the query that follows says why). `live_only`: pollers the
    server has not heard from within LIVE_SECONDS do not count (the list alone keeps a stopped
    worker); `polls_before`: nor those that have not polled again since. `polls_seen` is filled
    with the pollers' last polls."""
    task_queue = await session_queue(client, session_id)
    if task_queue is None:
        return None
    return await unpolled_queue_line(client, task_queue, live_only=live_only, polls_before=polls_before,
                                     polls_seen=polls_seen)


async def no_worker_after(client: Client, session_id: str, error: RPCError, polls_before: Polls) -> str | None:
    """The line for a query that failed because no worker took it: the server said no worker polls
    lately, or the query timed out and no worker polled again after `polls_before` (one that polls
    takes the query's task and polls again at once). None for any other failure."""
    if NO_RECENT_POLLER in str(error):
        task_queue = await session_queue(client, session_id)
        return None if task_queue is None else no_worker_text(task_queue)
    if error.status in TIMED_OUT:
        return await no_worker_line(client, session_id, live_only=True, polls_before=polls_before)
    return None


async def session_queue(client: Client, session_id: str) -> str | None:
    """The task queue of the session's newest run; None when it cannot be described (no such session)."""
    try:
        return (await client.get_workflow_handle(session_id).describe()).task_queue
    except RPCError:
        return None


async def unpolled_queue_line(client: Client, task_queue: str, *, live_only: bool = False,
                              polls_before: Polls | None = None, polls_seen: Polls | None = None,
                              grace_seconds: float = GRACE_SECONDS) -> str | None:
    """One line when no worker polls `task_queue` for workflow tasks, else None. A worker that is
    starting polls within moments: the queue is looked at again for `grace_seconds` before the
    line is given. `live_only`: pollers the server has not heard from within LIVE_SECONDS do not count."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_seconds
    while True:
        try:
            answer = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
        except RPCError:
            return None
        if polls_seen is not None:
            polls_seen.update({poller.identity: last_poll(poller) for poller in answer.pollers})
        if any(not live_only or heard_from_lately(poller, polls_before) for poller in answer.pollers):
            return None
        if loop.time() >= deadline:
            return no_worker_text(task_queue)
        await asyncio.sleep(min(LOOK_AGAIN_SECONDS, max(0.0, deadline - loop.time())))


def last_poll(poller: PollerInfo) -> datetime:
    if not poller.HasField("last_access_time"):
        return datetime.max.replace(tzinfo=timezone.utc)  # not told: taken as polling now
    return poller.last_access_time.ToDatetime(tzinfo=timezone.utc)


def heard_from_lately(poller: PollerInfo, polls_before: Polls | None = None) -> bool:
    seen = last_poll(poller)
    if polls_before is not None and poller.identity in polls_before:
        return seen > polls_before[poller.identity]
    return datetime.now(timezone.utc) - seen <= timedelta(seconds=LIVE_SECONDS)


def no_worker_text(task_queue: str) -> str:
    return (f"no worker polls task queue {task_queue}: start one with `python worker.py` "
            f"(HITL_TASK_QUEUE={task_queue}, and the same TEMPORAL_ADDRESS and namespace)")
