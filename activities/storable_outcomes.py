"""Every activity's outcome, its result or its failure, is one Temporal can store, or a final failure.

The SDK converts an activity's result after the activity's code has returned, outside any
attempt count of ours (activities/model.py, final_on_attempt): a result it cannot convert
(a str holding a lone surrogate, `\\ud800`) was a retryable failure of the attempt, and the
session's retry policies have no attempt limit (workflows/activity_calls.py). The model
activity was retried for ever, each attempt a paid call, the session `running` with no
error. Converted here, inside the attempt, such a result is a non-retryable UnstorableResult
failure, which the workflow treats like any failed call: the turn ends with the reason, or the
model reads that the tool failed. The payload is handed on as a RawValue, which the SDK
passes through as it is: converted once, not twice.

A failure whose text holds a lone surrogate cannot be stored either (the SDK reports a
retryable "Failed building exception result" in its place): its text is made well-formed,
its retryability kept.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, TemporalError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from workflows.limits import RECORDED_BYTES, clip, is_well_formed, well_formed

UNSTORABLE_RESULT = "UnstorableResult"
CAUSES_CHECKED = 20  # a failure's chain of causes is stored with it


class StorableOutcomesInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            result = await super().execute_activity(input)
        except Exception as error:
            if has_well_formed_text(error):
                raise
            raise well_formed_failure(error) from None
        return stored(result)


def stored(result: Any) -> RawValue:
    """The result as the payload history will hold, or a final failure saying why it cannot be."""
    try:
        [payload] = activity.payload_converter().to_payloads([result])
    except Exception as error:  # noqa: BLE001 (whatever the converter raises, the result cannot be stored)
        reason = well_formed(clip(f"{type(error).__name__}: {error}", RECORDED_BYTES))
        raise ApplicationError(f"its result cannot be stored ({reason})", type=UNSTORABLE_RESULT,
                               non_retryable=True) from None
    return RawValue(payload)


def has_well_formed_text(error: BaseException) -> bool:
    seen: BaseException | None = error
    for _ in range(CAUSES_CHECKED):
        if seen is None:
            return True
        if not is_well_formed(str(seen)) or not is_well_formed(getattr(seen, "type", None) or ""):
            return False
        seen = seen.__cause__
    return True


def well_formed_failure(error: Exception) -> Exception:
    """`error` with well-formed text and no cause: an ApplicationError keeps its type and retryability;
    any other exception becomes one named after its class, retryable as it was."""
    if isinstance(error, ApplicationError):
        return ApplicationError(well_formed(error.message), type=well_formed(error.type or "") or None,
                                non_retryable=error.non_retryable, next_retry_delay=error.next_retry_delay,
                                category=error.category)
    if isinstance(error, TemporalError):  # the SDK's own (cancellation and the like): never reshaped
        return error
    return ApplicationError(well_formed(str(error)), type=type(error).__name__)


class StorableOutcomes(Interceptor):
    """Registered by HitlPlugin (hitl/plugin.py) on every worker, for every activity it runs, local ones too."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return StorableOutcomesInbound(next)
