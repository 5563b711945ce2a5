"""Every model call measured: latency and tokens as metrics, and a GenAI span for traces.

`ObservedModel` wraps whichever backend the worker chose (worker.py), so the model
activity itself is unchanged. A backend that learns the token counts of a call (the
OpenAI-compatible one reads the reply's `usage`) reports them with `report_usage`; they
travel in a context variable, not in the reply, because what the reply carries is
recorded in the session's history.

The span follows OpenTelemetry's GenAI semantic conventions ("chat {model}", kind
CLIENT, `gen_ai.*` attributes) as a child of the activity's span; with no tracer
provider installed it costs nothing. Metrics go through `activity.metric_meter()`, the
runtime's (hitl/telemetry.py); with no metrics configured it records nowhere.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

from opentelemetry import trace
from temporalio import activity

from workflows.conversation import ModelReply
from workflows.requests import ModelRequest

MODEL_CALL_SECONDS = "hitl_model_call_seconds"
MODEL_TOKENS = "hitl_model_tokens"

tracer = trace.get_tracer(__name__)


@dataclass
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    response_model: str | None = None


_usage: ContextVar[Usage | None] = ContextVar("model_usage", default=None)


def report_usage(input_tokens: object, output_tokens: object, response_model: object = None) -> None:
    """What a backend read of the call's usage; ignored outside an observed call, and where not a count."""
    usage = _usage.get()
    if usage is None:
        return
    usage.input_tokens = input_tokens if isinstance(input_tokens, int) and input_tokens >= 0 else None
    usage.output_tokens = output_tokens if isinstance(output_tokens, int) and output_tokens >= 0 else None
    usage.response_model = response_model[:200] if isinstance(response_model, str) else None


class ObservedModel:
    def __init__(self, backend: object, system: str, default_model: str) -> None:
        self.backend = backend
        self.system = system  # gen_ai.system: "openai", or "offline" for the stand-in
        self.default_model = default_model
        self.description = backend.description  # type: ignore[attr-defined]

    async def complete(self, request: ModelRequest) -> ModelReply:
        model = request.model or self.default_model
        usage = Usage()
        token = _usage.set(usage)
        started = time.monotonic()
        outcome = "error"
        with tracer.start_as_current_span(f"chat {model}", kind=trace.SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": self.system, "gen_ai.request.model": model,
        }) as span:
            try:
                reply = await self.backend.complete(request)  # type: ignore[attr-defined]
                outcome = "ok"
                return reply
            finally:
                _usage.reset(token)
                self.record(span, model, outcome, time.monotonic() - started, usage)

    def record(self, span: trace.Span, model: str, outcome: str, seconds: float, usage: Usage) -> None:
        if usage.response_model:
            span.set_attribute("gen_ai.response.model", usage.response_model)
        if usage.input_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        if usage.output_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if not activity.in_activity():
            return
        meter = activity.metric_meter().with_additional_attributes({"model": model[:100], "system": self.system})
        meter.create_histogram_float(MODEL_CALL_SECONDS, "Model call latency, by model and outcome", "s").record(
            seconds, {"outcome": outcome})
        tokens = meter.create_counter(MODEL_TOKENS, "Tokens the model reported, by model and type (input, output)")
        if usage.input_tokens:
            tokens.add(usage.input_tokens, {"type": "input"})
        if usage.output_tokens:
            tokens.add(usage.output_tokens, {"type": "output"})


def observed(backend: object) -> ObservedModel:
    """The backend measured, with the GenAI system and default model it names."""
    if isinstance(backend, ObservedModel):
        return backend
    default_model = getattr(backend, "default_model", None) or "offline"
    return ObservedModel(backend, getattr(backend, "gen_ai_system", "offline"), default_model)
