"""One task queue, one workspace: a worker refuses to join workers of another HITL_WORKSPACE.

The receipts that keep a non-idempotent tool call at most once (an MCP call,
a booking) live in the workspace (.hitl/receipts.sqlite). A call retried on a
worker with another workspace finds no receipt and runs again. So each
workspace has an identity (a random id in .hitl/workspace-id, made on first
use: workers that share the folder, e.g. over NFS, share it), every worker
names it in its Temporal identity (`<identity> workspace:<id>`), and a worker
that starts on a queue whose pollers name another one stops with one line.

What it cannot see: a worker that starts at the same moment as another (both
find the queue empty), and one that stopped polling more than LIVE_SECONDS
ago (a worker long gone does not block a redeploy with a new workspace). A
worker of this host whose process is gone does not count either; one of
another host that stopped within LIVE_SECONDS does (wait, or share the
workspace).
"""

from __future__ import annotations

import os
import secrets
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from activities.tools.workspace import STATE_FOLDER, Workspace

ID_FILE = "workspace-id"
MARK = " workspace:"
LIVE_SECONDS = 120  # pollers long-poll for about a minute; a live worker was seen within two


def workspace_id(workspace: Path) -> str:
    """This workspace's identity, created (0600, in the private .hitl/) on first use, once."""
    with Workspace(workspace) as opened:
        folder = opened.own_folder(STATE_FOLDER)
        # Workers started together on a fresh workspace race to make it: the first one's is everyone's.
        opened.create_private_file_once(folder, ID_FILE, secrets.token_hex(8).encode())
        descriptor = os.open(ID_FILE, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
        try:
            return os.read(descriptor, 64).decode().strip()
        finally:
            os.close(descriptor)


def with_workspace(identity: str, workspace: str) -> str:
    return f"{without_workspace(identity)}{MARK}{workspace}"


def without_workspace(identity: str) -> str:
    return identity.split(MARK, 1)[0]


async def other_workspaces(client: Client, task_queue: str, mine: str) -> list[str]:
    """Identities of live workers of this queue (workflow or activity pollers) that name another workspace."""
    now = datetime.now(timezone.utc)
    found: list[str] = []
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        answer = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=kind))
        for poller in answer.pollers:
            seen = poller.last_access_time.ToDatetime(tzinfo=timezone.utc) if poller.HasField("last_access_time") else now
            if now - seen > timedelta(seconds=LIVE_SECONDS) or MARK not in poller.identity:
                continue
            if poller.identity.split(MARK, 1)[1] != mine and poller.identity not in found and not gone(poller.identity):
                found.append(poller.identity)
    return found


def gone(identity: str) -> bool:
    """A worker of this host (the SDK's `<pid>@<host>`) whose process no longer exists: the server
    lists a stopped worker's pollers for a while after it stopped."""
    pid, at, host = without_workspace(identity).partition("@")
    if not at or host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def refuse_another_workspace(client: Client, task_queue: str, workspace: Path) -> str:
    """This worker's workspace id; SystemExit with one line when the queue is served from another."""
    mine = workspace_id(workspace)
    others = await other_workspaces(client, task_queue, mine)
    if others:
        raise SystemExit(
            f"worker: task queue {task_queue} is served by {others[0]}, whose HITL_WORKSPACE is another "
            f"(this one, {workspace.resolve()}, is workspace:{mine}); workers of one queue must share one "
            "workspace, whose receipts keep each tool call at most once: share it, or use another HITL_TASK_QUEUE")
    return mine
