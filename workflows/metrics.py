"""The product's metrics that happen in the workflow: pauses opened, the wait for a decision, refusals.

They are counted from the session's own event stream (workflows/events.py), so every
pause a live client sees opened is counted once, with the same words. They go through
`workflow.metric_meter()`, which records nothing while the worker replays history: a
session replayed after a cache eviction or on another worker does not count its old
pauses again. Outside a workflow (unit tests of the pure modules) nothing is recorded.

Labels are bounded sets (kinds, tools, outcomes, verbs, reason classes), never people,
session ids or text: each label value is a time series the operator's Prometheus keeps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from temporalio import workflow
from temporalio.worker import (
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

PAUSES_OPENED = "hitl_pauses_opened"
DECISION_SECONDS = "hitl_pause_decision_seconds"
REFUSALS = "hitl_refusals"

# Read in order: the first class with a phrase found in a refusal's reason names it. The
# words are the workflow's own refusals; hitl/api/gateway.py's REFUSAL_STATUS groups the same
# phrases into HTTP statuses (one table for both would be better: see docs/observability.md).
REASON_CLASSES: list[tuple[str, tuple[str, ...]]] = [
    ("internal_error", ("internal error",)),
    ("malformed", ("malformed", "do not fit", "invalid", "too long", "longer than", "arguments were sent",
                   "say which call_id", "is a question", "use approve or reject")),
    ("unknown_call", ("unknown call_id", "nothing is pending")),
    ("not_permitted", ("may not decide", "may decide", "four-eyes", "needs another person", "say who you are",
                       "does not let", "cannot remember")),
    ("busy", ("already wait", "try again")),
    ("proof", ("proof", "verified", "signature", "reset")),
    ("closed", ("closed", "being cancelled")),
    ("conflict", ("already settled", "stale", "claimed by", "is not claimed", "already approved",
                  "has already run", "has not run yet")),
]


def reason_class(reason: str) -> str:
    lowered = reason.lower()
    return next((name for name, phrases in REASON_CLASSES if any(p in lowered for p in phrases)), "other")


def count_event(type_: str, at: datetime, data: dict[str, Any], earlier: Sequence[Any]) -> None:
    """Called by EventLog.add for each new event; `earlier` is the log so far (to find the
    pause a settlement closes)."""
    if not workflow.in_workflow():
        return
    if type_ == "pause_opened":
        count(PAUSES_OPENED, "Pauses opened for a person, by kind (approval, question, review) and tool",
              kind=data.get("kind"), tool=data.get("tool"))
    elif type_ == "pause_settled":
        opened = next((event for event in reversed(earlier) if event.type == "pause_opened"
                       and event.data.get("call_id") == data.get("call_id")), None)
        if opened is None:  # opened beyond the kept tail of events: its wait is unknown
            return
        waited = max(0.0, (at - datetime.fromisoformat(opened.data["requested_at"])).total_seconds())
        workflow.metric_meter().create_histogram_float(
            DECISION_SECONDS, "From a pause opening to its settlement, by kind and outcome", "s",
        ).record(waited, {"kind": label(opened.data.get("kind")), "outcome": label(data.get("outcome"))})
    elif type_ == "refused":
        refused(str(data.get("signal")), str(data.get("reason", "")))


def refused(verb: str, reason: str) -> None:
    count(REFUSALS, "Signals and Updates the session refused, by verb and reason class",
          verb=verb, reason=reason_class(reason))


def count(name: str, description: str, **labels: Any) -> None:
    workflow.metric_meter().create_counter(name, description).add(1, {key: label(value) for key, value in labels.items()})


def label(value: Any) -> str:
    return value[:100] if isinstance(value, str) and value else "unknown"


class RefusedUpdates(WorkflowInboundInterceptor):
    """An Update its validator rejects leaves no event and no trace in history (that is the
    point of a validator), so it is counted here, where the rejection happens. Validators
    do not run again on replay, so each is counted once."""

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        try:
            super().handle_update_validator(input)
        except Exception as error:
            refused(input.update.removesuffix("_update"), str(error))
            raise


class SessionMetrics(Interceptor):
    """Registered by HitlPlugin (hitl/plugin.py) on every worker and replayer."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return RefusedUpdates
