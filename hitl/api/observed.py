"""The API's middleware for operators: a span per request, and its count and latency by route.

Each API request as operators see it: a server span that the Temporal calls it makes join,
and a count and a latency by route and status. Installed only when tracing or the API's
metrics are on (hitl/telemetry.py); otherwise the app is as it was.

A plain ASGI middleware rather than opentelemetry-instrumentation-fastapi, which the lock
files do not carry: the span follows the HTTP semantic conventions (name "METHOD route",
`http.request.method`, `http.route`, `http.response.status_code`) and continues a caller's
trace from its `traceparent` header. Labels are the route template, never the path: a
session id in a label would be a time series per session.
"""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from typing import Any, Awaitable, Callable, Mapping

from opentelemetry import propagate, trace
from temporalio.common import MetricMeter
from temporalio.runtime import Runtime

from hitl import telemetry
from hitl.telemetry import API_REQUEST_SECONDS, API_REQUESTS

tracer = trace.get_tracer(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ObservedRequests:
    def __init__(self, app: Any, meter: MetricMeter | None, tracing: bool) -> None:
        self.app = app
        self.tracing = tracing
        self.requests = meter.create_counter(API_REQUESTS, "API requests, by method, route and status") if meter else None
        self.seconds = meter.create_histogram_float(
            API_REQUEST_SECONDS, "API request latency (an event stream counts until it closes)", "s") if meter else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, status = scope.get("method", "GET"), 500
        started = time.monotonic()

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers", [])}
        context = propagate.extract(headers) if self.tracing else None
        span_of_request = tracer.start_as_current_span(method, context=context, kind=trace.SpanKind.SERVER, attributes={
            "http.request.method": method, "url.path": scope.get("path", ""),
        }) if self.tracing else nullcontext()
        with span_of_request as span:
            try:
                await self.app(scope, receive, sending)
            finally:
                route = route_of(scope)
                if span is not None:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(trace.StatusCode.ERROR)
                labels = {"method": method, "route": route, "status": str(status)}
                if self.requests is not None and self.seconds is not None:
                    self.requests.add(1, labels)
                    self.seconds.record(time.monotonic() - started, labels)


def route_of(scope: Scope) -> str:
    """The matched route's template (`/sessions/{session_id}`), or "unmatched"; a parameter's
    converter (`{call_id:path}`, a sub-agent's call id holds slashes) is no part of its name."""
    route = scope.get("route")
    return getattr(route, "path_format", None) or getattr(route, "path", None) or "unmatched"


def observe(app: Any, environ: Mapping[str, str] = os.environ) -> None:
    """Install the middleware when HITL_API_METRICS_PORT or tracing asks for it (create_app)."""
    metered = bool(environ.get("HITL_API_METRICS_PORT", "").strip())
    tracing = telemetry.tracing_wanted(environ)
    if metered or tracing:
        app.add_middleware(ObservedRequests, meter=Runtime.default().metric_meter if metered else None, tracing=tracing)
