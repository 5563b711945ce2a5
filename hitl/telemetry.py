"""What operators see: Prometheus metrics and OpenTelemetry traces, both off by default.

Metrics are the Temporal SDK's own exporter (the Rust core serves `/metrics`), so a
process that asks for them serves the SDK's series (workflow task latency, sticky
cache, polls, requests) and the product's (`hitl_*`, docs/observability.md) on one
port: `HITL_METRICS_PORT` for a worker, `HITL_API_METRICS_PORT` for the API.

Traces go through `temporalio.contrib.opentelemetry.TracingInterceptor` on every client
(worker, API, starter), so an API request, the workflow it signals and the model and
tool activities that follow are one trace. `HITL_OTEL=1` or the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` turns them on; the exporter and the service name come
from the standard `OTEL_*` variables. Temporal's contrib module needs opentelemetry-sdk (the
`tracing` extra, which the runtime lock file does not carry): without it, HITL_OTEL=1 stops a
process at start with that reason, and an endpoint alone is warned about and ignored.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from importlib.util import find_spec
from typing import Any, Mapping

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

# The API's series (hitl/api/observed.py records them), named here so this ground-floor module
# sets their buckets without importing the API.
API_REQUESTS = "hitl_api_requests"
API_REQUEST_SECONDS = "hitl_api_request_seconds"

NEEDS_SDK = ("tracing needs opentelemetry-sdk and an exporter to send spans to: "
             "pip install 'hitl-agent[tracing]' (or -e '.[tracing]' in a checkout)")


class TelemetryError(ValueError):
    """A setting that cannot be honoured; the process stops at start with this reason."""


def bind_address(setting: str) -> str:
    """`9464` listens on every interface (Prometheus scrapes from elsewhere); `127.0.0.1:9464` on one."""
    text = setting.strip()
    host, _, port = text.rpartition(":") if ":" in text else ("0.0.0.0", ":", text)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise TelemetryError(f"a metrics port must be a port number or host:port, not {setting!r}")
    return f"{host or '0.0.0.0'}:{port}"


def metrics_runtime(setting: str) -> Runtime:
    """A Temporal runtime whose core serves Prometheus metrics at `setting` (see bind_address).
    The SDK's own series keep its defaults (durations in milliseconds), as Temporal's dashboards read them."""
    address = bind_address(setting)
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(
            bind_address=address, histogram_bucket_overrides=product_buckets())))
    except Exception as error:  # the core's own message: the port is taken, the address unknown, ...
        raise TelemetryError(f"cannot serve metrics on {address}: {error}") from None


def product_buckets() -> dict[str, list[float]]:
    """The product's histograms are in seconds; the core's default buckets are for milliseconds."""
    from activities.observed_model import MODEL_CALL_SECONDS
    from workflows.metrics import DECISION_SECONDS

    return {
        DECISION_SECONDS: [1, 5, 15, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 86400],  # people
        MODEL_CALL_SECONDS: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
        API_REQUEST_SECONDS: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }


def serve_metrics(variable: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """With `variable` set, every client this process connects from now on reports to a
    Prometheus endpoint there. Call before the first client connects. The address, or None."""
    setting = environ.get(variable, "").strip()
    if not setting:
        return None
    Runtime.set_default(metrics_runtime(setting), error_if_already_set=False)
    return f"http://{bind_address(setting)}/metrics"


def tracing_asked(environ: Mapping[str, str] = os.environ) -> bool:
    """HITL_OTEL=1: traces or stop. (An endpoint alone may be set cluster-wide for other programs.)"""
    return environ.get("HITL_OTEL", "").strip().lower() in ("1", "true", "yes", "on")


def tracing_wanted(environ: Mapping[str, str] = os.environ) -> bool:
    flag = environ.get("HITL_OTEL", "").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    if not (tracing_asked(environ) or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()):
        return False
    if tracing_asked(environ) or find_spec("opentelemetry.sdk") is not None:
        return True
    warn_once(f"telemetry: OTEL_EXPORTER_OTLP_ENDPOINT is set but {NEEDS_SDK}; no traces (HITL_OTEL=1 would stop here)")
    return False


@lru_cache(maxsize=None)
def warn_once(text: str) -> None:
    print(text, file=sys.stderr)


def start_tracing(service: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Tracing for this process when asked for: the tracer provider already installed (by
    `opentelemetry-instrument`, or a test), else one that sends spans over OTLP. None when off."""
    if not tracing_wanted(environ):
        return None
    import opentelemetry.trace

    try:
        import temporalio.contrib.opentelemetry  # noqa: F401 (imports the SDK: fail here, not at the first call)
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise TelemetryError(f"{NEEDS_SDK} ({error})") from None
    if not isinstance(opentelemetry.trace.get_tracer_provider(), opentelemetry.trace.ProxyTracerProvider):
        return "spans go to the tracer provider already installed"
    provider = TracerProvider(resource=Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or service}))
    provider.add_span_processor(BatchSpanProcessor(otlp_exporter(environ)))
    opentelemetry.trace.set_tracer_provider(provider)
    return f"spans over OTLP to {environ.get('OTEL_EXPORTER_OTLP_ENDPOINT') or 'the exporter default'}"


def otlp_exporter(environ: Mapping[str, str]) -> Any:
    """OTLP over the protocol OTEL_EXPORTER_OTLP_PROTOCOL names (grpc unless http/protobuf)."""
    try:
        if environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc").startswith("http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError as error:
        raise TelemetryError(f"{NEEDS_SDK} ({error})") from None
    return OTLPSpanExporter()


def client_interceptors(environ: Mapping[str, str] = os.environ) -> list[Any]:
    """What every Temporal client gets (settings.connect). A worker built on a client takes
    the client's interceptors that are worker interceptors too, so this one also traces
    the workflow and its activities."""
    if not tracing_wanted(environ):
        return []
    try:
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError as error:
        raise TelemetryError(f"{NEEDS_SDK} ({error})") from None
    return [TracingInterceptor()]


def start(service: str, metrics_variable: str | None, environ: Mapping[str, str] = os.environ) -> list[str]:
    """Metrics and tracing for a process, as its environment asks; what it turned on, for
    the start-up lines. Before the process's first client connects."""
    lines = []
    if metrics_variable and (address := serve_metrics(metrics_variable, environ)):
        lines.append(f"metrics: Prometheus at {address}")
    if tracing := start_tracing(service, environ):
        lines.append(f"traces: {tracing}")
    return lines


def flush() -> None:
    """Send the spans still buffered (a CLI command ends with os._exit, see hitl/exit_cleanly.py)."""
    import opentelemetry.trace

    force_flush = getattr(opentelemetry.trace.get_tracer_provider(), "force_flush", None)
    if force_flush is not None:
        force_flush()
