"""The tests' Temporal client bounds the waits that have no end of their own.

`handle.result()` waits for the session to close and `execute_update` for the Update's outcome;
either waits for ever when no worker will take the workflow task that would bring it (a worker
stopped, a task queue nobody polls). Through this interceptor a test that would hang fails after
WAIT_SECONDS times the patience, saying what it waited for and what the server still holds the
session busy with. The bound is a guard against a hang, never a speed test: minutes, for things
that take seconds.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any, Awaitable, TypeVar

from temporalio.client import (
    DescribeWorkflowInput,
    FetchWorkflowHistoryEventsInput,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowHistoryEventAsyncIterator,
    WorkflowHistoryEventFilterType,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.api.history.v1 import HistoryEvent

from tests.support.sessions import PATIENCE, busy_with

WAIT_SECONDS = 300

T = TypeVar("T")


class BoundedWaits(Interceptor):
    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next)


class _Outbound(OutboundInterceptor):
    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle[Any]:
        if input.wait_for_stage != WorkflowUpdateStage.COMPLETED:
            return await super().start_workflow_update(input)
        return await _within(super().start_workflow_update(input), self, input.id, f"the Update {input.update!r}")

    def fetch_workflow_history_events(self, input: FetchWorkflowHistoryEventsInput) -> WorkflowHistoryEventAsyncIterator:
        events = super().fetch_workflow_history_events(input)
        if input.wait_new_event and input.event_filter_type == WorkflowHistoryEventFilterType.CLOSE_EVENT:
            events.__class__ = _BoundedCloseWait  # handle.result(): waits for the close event alone
            events.outbound = self  # type: ignore[attr-defined]
        return events


class _BoundedCloseWait(WorkflowHistoryEventAsyncIterator):
    outbound: OutboundInterceptor

    async def __anext__(self) -> HistoryEvent:
        return await _within(super().__anext__(), self.outbound, self._input.id, "its close (handle.result())")


async def _within(awaitable: Awaitable[T], outbound: OutboundInterceptor, workflow_id: str, awaited: str) -> T:
    """`awaitable`'s result, or an AssertionError saying what hung. (Not asyncio.wait_for: the SDK
    turns the cancellation of an Update's wait into an error of its own, which wait_for would raise.)"""
    waiting = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({waiting}, timeout=WAIT_SECONDS * PATIENCE)
    except asyncio.CancelledError:
        waiting.cancel()
        raise
    if waiting in done:
        return waiting.result()
    waiting.cancel()
    with suppress(BaseException):
        await waiting
    raise AssertionError(await _hung(outbound, workflow_id, awaited))


async def _hung(outbound: OutboundInterceptor, workflow_id: str, awaited: str) -> str:
    """What a test waited for on `workflow_id` in vain, and what the server holds it busy with."""
    return f"{workflow_id}: {awaited} did not come within {WAIT_SECONDS * PATIENCE:.0f} s; {await _in_flight(outbound, workflow_id)}"


async def _in_flight(outbound: OutboundInterceptor, workflow_id: str) -> str:
    try:
        description = await outbound.describe_workflow(
            DescribeWorkflowInput(id=workflow_id, run_id=None, rpc_metadata={}, rpc_timeout=None))
    except Exception as error:  # said in the message: the test fails either way
        return f"its description failed ({error})"
    busy = busy_with(description.raw_description)
    return f"in flight: {', '.join(busy)}" if busy else "nothing in flight (it waits on something no worker brings)"
