"""`watch` on a session that delegates: the calls waiting in its children, as its `pending` lists them.

A session's event stream carries its own pauses; what waits below it is in its `pending` (with each
call's `path` and child `session_id`, docs/interface.md, Sub-agents), which changes without an event
of the root's when a second child pauses while the root already waits. So `watch` asks the root's
`pending` once a second, only on a session offered a `delegate__` tool, and prints each child's call
as it opens and as it stops waiting.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError

from hitl.client.events import RPC
from hitl.console.render import describe_item, say
from workflows.agents import DELEGATE_PREFIX
from workflows.contract import PENDING, STATUS

TREE_EVERY_SECONDS = 1.0


async def delegates(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        status = await handle.query(STATUS.name, rpc_timeout=RPC)
    except (RPCError, WorkflowQueryFailedError):
        return False
    return any(str(tool).startswith(DELEGATE_PREFIX) for tool in status.get("tools") or [])


def tree_changes(shown: dict[str, dict[str, Any]], pending: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Lines for the children's calls that opened and those that stopped waiting since `shown`."""
    below = {item["call_id"]: item for item in pending if item.get("path")}
    lines = [f"⏸ in {' › '.join(item['path'])} (session {item.get('session_id')}): {describe_item(item)}"
             for call_id, item in below.items() if call_id not in shown]
    lines += [f"✓ {call_id} no longer waits in {' › '.join(item['path'])}"
              for call_id, item in shown.items() if call_id not in below]
    return lines, below


async def follow_tree(handle: WorkflowHandle[Any, Any]) -> None:
    """Until cancelled (the watch ends with the session)."""
    if not await delegates(handle):
        return
    shown: dict[str, dict[str, Any]] = {}
    while True:
        try:
            pending = await handle.query(PENDING.name, rpc_timeout=RPC)
        except (RPCError, WorkflowQueryFailedError):
            pass  # between runs, or a worker restarting: asked again in a second
        else:
            lines, shown = tree_changes(shown, pending)
            for line in lines:
                say(line, flush=True)
        await asyncio.sleep(TREE_EVERY_SECONDS)
