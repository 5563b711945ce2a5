"""How the session calls its activities: timeouts, retries, and what a failure says.

The model, tools and notifications are the session's only doors to the world;
their options live here so the loop reads as calls, not as retry policies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Awaitable, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError

from workflows.conversation import ModelReply
from workflows.limits import RECORDED_BYTES, clip, json_well_formed, unreadable_reason
from workflows.patches import RESULTS_READ_AS_THEIR_TYPE

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
NOTIFY_CALL: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(minutes=1)),
)


@dataclass(frozen=True)
class HistoryReading:
    """The history's length (events) and size (bytes), as the run's decisions read them."""

    length: int
    size: int


class LocalChecks:
    """A part of AgentWorkflow: every local activity goes through `local_activity`, which counts
    those in flight, so that Updates are refused meanwhile (workflows/inbound.py, refuse_while_busy),
    and pins the history reading the decisions after it see (`history_reading`)."""

    def __init__(self) -> None:
        self.in_flight = 0  # local activities whose result has not reached the code yet
        self.history_as_of: HistoryReading | None = None
        self.moved_on_meanwhile = False

    async def local_activity(self, name: str, arg: Any, **options: Any) -> Any:
        started = self.history_reading()
        self.in_flight += 1
        try:
            return await workflow.execute_local_activity(name, arg, **options)
        finally:
            self.in_flight -= 1
            self.history_as_of = started
            if self.moved_on_meanwhile:
                # Once the code after the activity has run to its first wait, as a replay runs it.
                self.moved_on_meanwhile = False
                asyncio.get_running_loop().call_soon(self.history_moved_on)

    def history_reading(self) -> HistoryReading:
        """The history's length and size for a decision (to hand over, to give up waiting).

        After a local activity, what it read as the activity started, until history events reach
        the code (`history_moved_on`). sdk-core can give a local activity's result to the code in
        a later workflow task than the one whose completion recorded its marker (when it answered
        a query meanwhile), and a replay gives it in the marker's task: read there, the length
        differs (22 events live and 18 replayed, in the history kept in tests/histories/races/),
        and a decision on it (hand over, or wait with a timer) went one way live and the other
        in the replay, which then failed every task."""
        if self.history_as_of is not None:
            return self.history_as_of
        info = workflow.info()
        return HistoryReading(info.get_current_history_length(), info.get_current_history_size())

    async def activity_outcome(self, call: Awaitable[T]) -> T:
        """An ordinary activity's result, or its ActivityError: either is an event of the history."""
        try:
            result = await call
        except ActivityError:
            self.history_moved_on()
            raise
        self.history_moved_on()
        return result

    def history_moved_on(self) -> None:
        """Called where the code meets an event of the history itself (a signal, an accepted Update,
        an activity's outcome, a timer's firing), which live and replayed runs meet in the same task:
        never where a local activity's result (nor anything it caused) wakes the code.

        Met while a local activity is in flight, it takes effect once the code after the activity
        has run to its first wait. Live, a late result can come in one activation with a signal,
        whose handler runs first; a replay gives the result in its marker's task and the signal
        in its own, later: the code after the result must read the pinned figures in both."""
        if self.in_flight:
            self.moved_on_meanwhile = True
            return
        self.history_as_of = None


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
    name = getattr(result_type, '__name__', result_type)
    try:
        value = workflow.payload_converter().from_payload(raw.payload, result_type)
    except Exception as error:
        raise UnreadableResult(f"not a {name}: {clip(f'{type(error).__name__}: {error}', RECORDED_BYTES)}") from None
    if isinstance(result_type, type) and not isinstance(value, result_type):
        workflow.deprecate_patch(RESULTS_READ_AS_THEIR_TYPE)  # where the first supported build wrote its marker
        encoding = raw.payload.metadata.get("encoding", b"").decode(errors="replace")
        raise UnreadableResult(f"not a {name}: its {clip(encoding, 100)!r} payload reads as {type(value).__name__}")
    return value


def read_reply(raw: RawValue | None) -> ModelReply:
    """The model activity's result, whose calls' arguments hold no lone surrogate once parsed.

    The activity writes such arguments again well-formed (activities/reply_bounds.py); a reply
    completed from outside may still escape one (`\\ud800` in the arguments' JSON), which the
    planner parses into arguments that no payload, hash or pause can hold."""
    reply = read_result(raw, ModelReply)
    for call in reply.tool_calls:
        arguments = call.function.arguments
        if json_well_formed(arguments) != arguments:
            workflow.deprecate_patch(RESULTS_READ_AS_THEIR_TYPE)  # likewise
            raise UnreadableResult(f"the arguments of call {clip(call.id, 100)!r} hold a lone surrogate")
    return reply
