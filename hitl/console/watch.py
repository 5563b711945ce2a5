"""`python starter.py watch <session>`: print a session's events as they happen, until it closes.

The same stream as the API's server-sent events (hitl/client/events.py). On a
terminal a spinner line shows that the agent is working (hitl/console/progress.py);
piped, each event is one plain line, or one JSON object per line with `--json`. On a
session that delegates, the calls waiting in its children are printed too (hitl/console/tree.py).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError

from hitl.client.events import RESYNC, RPC, SessionEvent, follow_events
from hitl.console.progress import Activity, WorkingIndicator
from hitl.console.render import describe_item, json_line, render_status, result_line, say
from hitl.console.tree import follow_tree
from workflows.contract import STATUS

STATUS_EVERY_SECONDS = 1.0


def describe_event(event: SessionEvent, tools_by_call: dict[str, str] | None = None) -> str:
    """One event as a line a person reads: what happened, with its id and time. A tool result
    names its tool, from the event or else from the pause that asked for it (`tools_by_call`)."""
    data = event.data
    when = event.at.astimezone().strftime("%H:%M:%S") if isinstance(event.at, datetime) else "--:--:--"
    if event.type == "state":
        text = f"state: {data.get('state')}"
    elif event.type == "pause_opened":
        text = describe_item({"kind": "approval", "tool": "?", "args": {}, "call_id": "?", **data})
    elif event.type == "pause_settled":
        by = f" by {data['by']}" if data.get("by") else ""
        why = f": {data['reason']}" if data.get("reason") else ""
        text = f"✓ {data.get('call_id')} {data.get('outcome')}{by}{why}"
    elif event.type == "vote":
        text = (f"✓ {data.get('call_id')} approved by {data.get('by')}, "
                f"{len(data.get('approvals') or [])} of {data.get('required_approvals')} approvals")
    elif event.type == "tool_result":
        first = result_line(str(data.get("content") or "")).removesuffix(" …")
        tool = data.get("tool") or (tools_by_call or {}).get(data.get("call_id", "")) or "tool"
        text = f"← {tool} ({data.get('call_id')}): {first}"
    elif event.type == "answer":
        text = f"Agent: {data.get('text')}"
    elif event.type == "message":
        text = f"{data.get('by') or 'You'}: {data.get('text')}"
    elif event.type == "claimed":
        text = f"{data.get('call_id')} claimed by {data.get('by')} until {data.get('until')}"
    elif event.type == "released":
        text = f"{data.get('call_id')} released"
    elif event.type == "refused":
        text = f"refused {data.get('signal')}: {data.get('reason')}"
    elif event.type == RESYNC:
        text = f"(events after #{data.get('after')} are no longer kept; the session now:)"
    else:
        text = f"{event.type} {json.dumps(data, ensure_ascii=False)}"
    return f"#{event.id} {when}  {text}"


async def watch(client: Client, session_id: str, after: int = 0, as_json: bool = False) -> int:
    """Follow the session until it closes; 0 then. Ctrl-C leaves it (the session goes on)."""
    handle = client.get_workflow_handle(session_id)
    activity = Activity()
    with WorkingIndicator() as indicator:
        poller = asyncio.create_task(keep_status(handle, activity, indicator)) if indicator.enabled else None
        tree = None if as_json else asyncio.create_task(follow_tree(handle))
        try:
            async for event in follow_events(client, session_id, after):
                activity.read_event(event)
                if as_json:
                    print(json_line(event.model_dump(mode="json")), flush=True)
                else:
                    say(describe_event(event, activity.tools_by_call), flush=True)
                if event.type == RESYNC and not as_json:
                    say("\n".join("    " + line for line in render_status(await handle.query(STATUS.name)).splitlines()))
                indicator.show(activity)
        finally:
            for task in (poller, tree):
                if task is not None:
                    task.cancel()
    if not as_json:
        say(f"(session {session_id} closed)")
    return 0


async def keep_status(handle: WorkflowHandle[Any, Any], activity: Activity, indicator: WorkingIndicator) -> None:
    """Turn and step between events, for the spinner line only (a terminal is watching)."""
    while True:
        try:
            activity.read_status(await handle.query(STATUS.name, rpc_timeout=RPC))
        except (RPCError, WorkflowQueryFailedError):
            pass  # between runs, or a worker restarting: the events go on, the line waits a second
        else:
            indicator.show(activity)
        await asyncio.sleep(STATUS_EVERY_SECONDS)
