"""A session's whole transcript, its earlier runs read from their own history instead of replayed.

Asking a closed run's `transcript_page` makes a worker replay the run's whole
history, once per page of 1.5 MB: about 85 s for the transcript of a 1,000-step
session with 20 KB tool results. A run that handed over recorded its
transcript by reference (workflows/transcript_index.py); here each earlier
run's history is fetched once, its payloads decoded with the client's data
converter (so encrypted sessions read the same), and every referenced string
put back from them. The newest run answers its own part through its queries,
as before: it may still be running.

Exactly what the queries give, or nothing: a run without an index (recorded
before it, or too large to index), a string no payload holds, or a run gone
with retention makes `read_transcript` answer None, and the caller reads by
queries (hitl/client/sessions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from workflows.contract import KEEP_TRANSCRIPT_INDEX, RECORD_TRANSCRIPT_INDEX, TRANSCRIPT_PAGE
from workflows.transcript_index import Unresolved, long_strings, resolved

RPC = timedelta(seconds=30)
LOCAL_ACTIVITY_MARKER = "core_local_activity"
PAGE = 100_000


@dataclass(frozen=True)
class RunPart:
    first_index: int
    messages: list[dict[str, Any]]
    earlier_run_id: str | None


def payloads_of(event: HistoryEvent) -> list[Payload]:
    """The payloads of an event that can hold transcript text: inputs, results, signals, Updates, markers."""
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        return list(event.workflow_execution_started_event_attributes.input.payloads)
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return list(event.activity_task_completed_event_attributes.result.payloads)
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        return list(event.workflow_execution_signaled_event_attributes.input.payloads)
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        return list(event.workflow_execution_update_accepted_event_attributes.accepted_request.input.args.payloads)
    if kind == EventType.EVENT_TYPE_MARKER_RECORDED:
        details = event.marker_recorded_event_attributes.details
        return list(details["result"].payloads) if "result" in details else []
    return []


def index_payloads(event: HistoryEvent, client: Client) -> list[Payload] | None:
    """The payloads of a run's transcript index, if this event records one: the input of a
    `record_transcript_index` activity, or (runs before it) a `keep_transcript_index` local
    activity's marker, whose data, written by the SDK core, is plain JSON. Only the workflow
    writes either (an activity's completion, which anyone may send, is not read here)."""
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        scheduled = event.activity_task_scheduled_event_attributes
        return list(scheduled.input.payloads) if scheduled.activity_type.name == RECORD_TRANSCRIPT_INDEX.name else None
    if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return None
    attributes = event.marker_recorded_event_attributes
    if attributes.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in attributes.details:
        return None
    data = attributes.details["data"].payloads
    try:
        marker = client.data_converter.payload_converter.from_payloads(list(data))[0]
    except Exception:
        return None
    if isinstance(marker, dict) and marker.get("activity_type") == KEEP_TRANSCRIPT_INDEX.name:
        return payloads_of(event)
    return None


async def decoded(client: Client, payloads: list[Payload]) -> list[Any]:
    codec = client.data_converter.payload_codec
    if codec is not None:
        payloads = await codec.decode(payloads)
    return client.data_converter.payload_converter.from_payloads(payloads)


async def readable(client: Client, payloads: list[Payload]) -> list[Any]:
    """The payloads this client can decode. Anyone who reaches the frontend can signal a session
    with a payload nobody here reads (an unknown encoding, JSON that is not, a seal under another
    key); the workflow refuses it and goes on, and it holds no string the index needs: skipped,
    so that the read still answers (a string only it held is then unresolved: read by queries)."""
    try:
        return await decoded(client, payloads)
    except Exception:  # noqa: BLE001 (one payload spoils the batch: decode them one by one)
        values: list[Any] = []
        for payload in payloads:
            try:
                values.extend(await decoded(client, [payload]))
            except Exception:  # noqa: BLE001
                continue
        return values


async def closed_run_part(client: Client, session_id: str, run_id: str) -> RunPart | None:
    """The messages a closed run held, from its history alone; None when it recorded no usable index."""
    try:
        history = await client.get_workflow_handle(session_id, run_id=run_id).fetch_history(rpc_timeout=RPC)
    except RPCError:
        return None  # gone with retention, say: the queries say so in their own way
    events = list(history.events)
    earlier = events[0].workflow_execution_started_event_attributes.continued_execution_run_id or None
    indexes = [payloads for payloads in (index_payloads(event, client) for event in events) if payloads is not None]
    if not indexes:
        return None
    groups = [payloads_of(event) for event in events]
    flat = [payload for group in groups for payload in group]
    strings: dict[str, str] = {}
    for value in await readable(client, flat):
        long_strings(value, strings)
    try:
        [index] = await decoded(client, indexes[-1])
        if index is None:  # the run recorded none: too large to index
            return None
        messages = resolved(index["messages"], strings)
    except (Unresolved, KeyError, TypeError, ValueError, RuntimeError):
        return None
    return RunPart(int(index["first_index"]), messages, earlier)


async def run_pages(handle: WorkflowHandle, offset: int, total: int) -> list[dict[str, Any]] | None:
    """Messages [offset, total) of a run, through its `transcript_page` query."""
    items: list[dict[str, Any]] = []
    while offset < total:
        page = await handle.query(TRANSCRIPT_PAGE.name, {"offset": offset, "limit": PAGE}, rpc_timeout=RPC)
        if not page["messages"] or page["offset"] != offset:
            return None
        items.extend(page["messages"])
        offset += len(page["messages"])
    return items


async def newest_run(client: Client, session_id: str) -> WorkflowHandle:
    """The session's current run, pinned. A session may hand over while it is read (an idle one
    does, in the tasks right after its last turn): read without a run id, the first page would come
    from one run and the next from its successor, whose part starts later, and messages between
    were skipped. Pinned, a read shows the session as it was when it began; a closed run still answers."""
    run_id = (await client.get_workflow_handle(session_id).describe(rpc_timeout=RPC)).run_id
    return client.get_workflow_handle(session_id, run_id=run_id)


async def read_transcript(client: Client, session_id: str) -> list[dict[str, Any]] | None:
    """The whole transcript across every run, or None when only the queries can say it exactly."""
    handle = await newest_run(client, session_id)
    newest = await handle.query(TRANSCRIPT_PAGE.name, {"offset": None}, rpc_timeout=RPC)
    upto, earlier = newest["first_index"], newest["earlier_run_id"]
    own = await run_pages(handle, upto, newest["total"])
    if own is None:
        return None
    parts = [own]
    while upto > 0:
        if not earlier:
            return None
        part = await closed_run_part(client, session_id, earlier)
        if part is None or not part.first_index <= upto <= part.first_index + len(part.messages):
            return None
        parts.append(part.messages[: upto - part.first_index])
        upto, earlier = part.first_index, part.earlier_run_id
    return [message for part in reversed(parts) for message in part]
