"""Is a session still healthy after a bad input? Shared by the catalogue and the property test.

Healthy means: no workflow task failed in any of its runs (a failed task is
retried for ever, so one is enough to wedge it), and every query answers.
A session continues as new under the same id, so the history is read run by
run, following each ContinuedAsNew event to the next run.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RawValue

from tests.support.sessions import PATIENCE, POLL_AT_LEAST_SECONDS, events_before

QUERIES = ("status", "pending", "transcript", "audit")
# Temporal's own optimistic concurrency, not a failure of the workflow's code: a
# signal arrived while the worker was completing the run, so the server asks
# for the task again with the new event (it succeeds at once).
# And the server's own flush: while a task is in flight the server buffers new events, and once
# they pass its limits (`history.maximumBufferedEventsSizeInBytes`, 2 MB, or 100 events) it fails
# that task with FORCE_CLOSE_COMMAND and schedules another with everything (its
# `closeTransactionHandleBufferedEventsLimit`). No worker can prevent it: four 1 MB signals sent
# while a busy worker holds the task are enough. The checks that follow (queries, the next
# decision) are what must hold after it.
BENIGN_CAUSES = {WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
                 WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND}


async def runs_of(client: Client, workflow_id: str, first_run_id: str | None) -> list[Any]:
    """The history of every run of a session, from `first_run_id` (or the current run) on."""
    histories, run_id = [], first_run_id
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1] if history.events else None
        if last is None or last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return histories
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


async def failed_workflow_tasks(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Why each workflow task of every run failed (empty when none did)."""
    first_run = handle.first_execution_run_id or handle.run_id
    failures = []
    for history in await runs_of(handle._client, handle.id, first_run):
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                continue
            attributes = event.workflow_task_failed_event_attributes
            if attributes.cause in BENIGN_CAUSES:
                continue
            cause = WorkflowTaskFailedCause.Name(attributes.cause)
            failures.append(f"run {history.run_id} event {event.event_id}: {cause}: {attributes.failure.message[:300]} "
                            f"(after {events_before(history, event.event_id)})")
    return failures


async def activity_attempts(handle: WorkflowHandle[Any, Any], activity_type: str) -> list[int]:
    """How many attempts each activity of this type took, as the history of the session's current
    run records them, and a pending one's so far (the server writes its start only when it closes)."""
    history = await handle.fetch_history()
    of_type = {event.event_id for event in history.events
               if event.activity_task_scheduled_event_attributes.activity_type.name == activity_type}
    attempts = [event.activity_task_started_event_attributes.attempt for event in history.events
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
                and event.activity_task_started_event_attributes.scheduled_event_id in of_type]
    pending = (await handle.describe()).raw_description.pending_activities
    return attempts + [found.attempt for found in pending if found.activity_type.name == activity_type]


async def how_it_ended(client: Client, workflow_id: str) -> str:
    """How the latest run of a session closed, in one line (for a test that found it closed): its
    status, its last event with the reason or failure, and the size of its history."""
    handle = client.get_workflow_handle(workflow_id)
    description = await handle.describe()
    history = await handle.fetch_history()
    last = history.events[-1]
    why = (last.workflow_execution_terminated_event_attributes.reason
           or last.workflow_execution_failed_event_attributes.failure.message)  # "" for other events
    size = sum(event.ByteSize() for event in history.events)
    return (f"run {description.run_id} is {description.status.name if description.status else 'unknown'}: "
            f"{EventType.Name(last.event_type)} {why[:300]!r} after {len(history.events)} events, {size:,} bytes")


async def query_patiently(handle: WorkflowHandle[Any, Any], name: str, timeout: float = 60) -> Any:
    """A query, asked again while it times out or the session is between runs, for up to `timeout`
    seconds (times HITL_TEST_PATIENCE): on a busy machine one answer about a session of many
    megabytes can take longer than one attempt's 5 s. A failed workflow task fails at once."""
    current = handle._client.get_workflow_handle(handle.id)
    deadline = asyncio.get_running_loop().time() + timeout * PATIENCE
    while True:
        try:
            return await current.query(name, rpc_timeout=timedelta(seconds=5))
        except Exception:  # noqa: BLE001  (a query can fail for a moment; a failed task cannot)
            await assert_no_failed_workflow_task(handle)
            if asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(max(0.1, POLL_AT_LEAST_SECONDS))


async def assert_no_failed_workflow_task(handle: WorkflowHandle[Any, Any]) -> None:
    failures = await failed_workflow_tasks(handle)
    assert not failures, f"{len(failures)} workflow task(s) failed: {failures[:3]}"


async def answers_queries(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """Every query of the current run, or the AssertionError saying which one failed and why."""
    answers = {}
    for name in QUERIES:
        try:
            answers[name] = await query_patiently(handle, name)
        except Exception as error:  # noqa: BLE001  (any failure is the finding)
            raise AssertionError(f"query {name} failed: {type(error).__name__}: {str(error)[:300]}") from None
    return answers


async def assert_healthy(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """No failed workflow task in any run, and every query answers; returns the answers."""
    answers = await answers_queries(handle)
    await assert_no_failed_workflow_task(handle)
    return answers


def raw_json(text: str) -> RawValue:
    """A payload sent exactly as written: JSON a client library would refuse to write
    (`Infinity`, nesting past a parser's limit) still reaches the workflow."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=text.encode()))


def raw_bytes(encoding: str, data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": encoding.encode()}, data=data))


async def wait_for_status(
    handle: WorkflowHandle[Any, Any], until: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    """Poll `status` until `until` holds; fail at once if a workflow task has failed (it never recovers)."""
    current = handle._client.get_workflow_handle(handle.id)
    timeout *= PATIENCE
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        try:
            last = await current.query("status", rpc_timeout=timedelta(seconds=5))
            if until(last):
                return last
        except Exception as error:  # noqa: BLE001  (a query can fail for a moment; a failed task cannot)
            last = error
        await assert_no_failed_workflow_task(handle)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"status not reached within {timeout}s; last: {str(last)[:500]}")
        await asyncio.sleep(max(0.1, POLL_AT_LEAST_SECONDS))


def is_settled(status: dict[str, Any]) -> bool:
    return status["state"] in ("idle", "closed") and status["queued_messages"] == 0 and status["pending"] == 0


def sane_decision(item: dict[str, Any]) -> tuple[str, list[str | None]]:
    """What a careful person does with a pending approval or review: approve it
    with as many allowed people as it needs (never its requester), else reject
    it as someone allowed to, else (nobody may decide it) cancel the session."""
    approvers = item.get("approvers")  # absent: anyone may decide
    approvals = item.get("approvals", [])
    needed = max(1, item.get("required_approvals", 1) - len(approvals))
    pool = approvers if approvers is not None else [f"approver-{n}" for n in range(1, 30)]
    fresh = [p for p in dict.fromkeys(pool) if p not in approvals and p != item.get("requested_by")]
    if len(fresh) >= needed:
        return "approve", list(fresh[:needed])
    if approvers:
        return "reject", [approvers[0]]
    return "cancel", [None]


async def decide_sanely(handle: WorkflowHandle[Any, Any], item: dict[str, Any]) -> str:
    """Settle one pending call the way a careful person would: the right call_id,
    by people allowed to decide it. Returns the audit event that settled it."""
    current = handle._client.get_workflow_handle(handle.id)
    call_id = item["call_id"]
    if item["kind"] == "question":
        answer = (item.get("choices") or ["Shanghai"])[0]
        await current.execute_update("answer_update", {"call_id": call_id, "answer": answer, "by": "someone"})
        return await eventually_settled(handle, call_id)
    verb, people = sane_decision(item)
    if verb == "cancel":
        await current.execute_update("cancel_update", {"reason": "nobody may decide this call"})
    for person in people if verb != "cancel" else []:
        await current.execute_update(f"{verb}_update", {"call_id": call_id, "by": person})
    return await eventually_settled(handle, call_id)


async def eventually_settled(handle: WorkflowHandle[Any, Any], call_id: str, timeout: float = 60) -> str:
    """The audit event that settled `call_id`, once it has one."""
    settling = {"approved", "edited", "rejected", "answered", "timed_out", "cancelled"}
    timeout *= PATIENCE
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        pending = await query_patiently(handle, "pending")
        if all(p["call_id"] != call_id for p in pending):
            events = [e["event"] for e in await query_patiently(handle, "audit")
                      if e.get("call_id") == call_id and e["event"] in settling]
            if events:
                return events[-1]
        await assert_no_failed_workflow_task(handle)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{call_id} was not settled within {timeout}s; pending: {pending}")
        await asyncio.sleep(0.1)


async def can_still_decide(handle: WorkflowHandle[Any, Any], workspace: Path) -> None:
    """What is pending is settled by a sane decision; with nothing pending, a new
    call is asked for and settled. Either way the session is healthy after."""
    current = handle._client.get_workflow_handle(handle.id)
    pending = await query_patiently(handle, "pending")
    if not pending:
        (workspace / "notes.txt").write_text("remember the milk\n")
        turn = (await query_patiently(handle, "status"))["turn"]
        await current.signal("user_message", {"text": "please delete notes.txt"})
        status = await wait_for_status(
            handle, lambda s: s["pending"] > 0 or s["state"] == "closed" or (is_settled(s) and s["turn"] > turn)
        )
        if status["state"] == "closed":
            await assert_healthy(handle)
            return
        assert status["pending"] > 0, f"a new message led to no decision: error {status['error']!r}"
        pending = await query_patiently(handle, "pending")
    for item in pending:
        await decide_sanely(handle, item)
    await assert_healthy(handle)
