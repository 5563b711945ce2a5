"""How the session calls its activities: timeouts, retries, and what a failure says.

The model, tools and notifications are the session's only doors to the world;
their options live here so the loop reads as calls, not as retry policies.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError

from workflows.limits import RECORDED_BYTES, clip, unreadable_reason

T = TypeVar("T")

# No attempt limit: a worker that dies mid-call is retried for as long as it
# takes. The activities count their own failures and make them final (see
# activities/model.py), so a broken tool or provider still ends the call.
def heartbeating(start_to_close: timedelta, maximum_interval: timedelta, final_error: str) -> dict[str, Any]:
    """A call that beats while it runs (a dead worker is noticed in 10 s) and ends only on its own
    final error type, never on an attempt count."""
    return dict(
        start_to_close_timeout=start_to_close,
        heartbeat_timeout=timedelta(seconds=10),
        retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=maximum_interval,
                                 non_retryable_error_types=[final_error]),
    )


MODEL_CALL = heartbeating(timedelta(minutes=5), timedelta(seconds=30), "ModelRequestRejected")
TOOL_CALL = heartbeating(timedelta(minutes=2), timedelta(seconds=10), "ToolError")
NOTIFY_CALL = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(minutes=1)),
)


class LocalChecks:
    """Mixed into AgentWorkflow: every local activity goes through `local_activity`, which counts
    those in flight, so that Updates are refused meanwhile (workflows/inbound.py, refuse_while_busy)."""

    local_activities_in_flight: int = 0

    async def local_activity(self, name: str, arg: Any, **options: Any) -> Any:
        self.local_activities_in_flight += 1
        try:
            return await workflow.execute_local_activity(name, arg, **options)
        finally:
            self.local_activities_in_flight -= 1


def failure_message(error: ActivityError) -> str:
    cause = error.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return getattr(cause, "message", None) or str(cause or error)


class UnreadableResult(Exception):
    """An activity's result that is not of its type, or that the codec could not open."""


def read_result(raw: RawValue | None, result_type: type[T]) -> T:
    """An activity's result, read by the workflow rather than by the SDK.

    Anyone who reaches the Temporal frontend can complete an activity by its id, with any payload.
    Read by the SDK as the activation is applied, a payload that is not a `ModelReply` (or is
    sealed under a key id the worker lacks) fails the workflow task on every retry and strands the
    session; read here, it is a failed call that the loop reports and moves on from."""
    if raw is None:  # completed with no payload at all
        raise UnreadableResult("the activity was completed with no result")
    reason = unreadable_reason(raw.payload.metadata)
    if reason is not None:
        raise UnreadableResult(f"unreadable payload: {reason}")
    try:
        return workflow.payload_converter().from_payload(raw.payload, result_type)
    except Exception as error:
        raise UnreadableResult(f"not a {getattr(result_type, '__name__', result_type)}: "
                               f"{clip(f'{type(error).__name__}: {error}', RECORDED_BYTES)}") from None
