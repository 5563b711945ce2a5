"""Operators can see it: Prometheus metrics from a real scrape, OpenTelemetry spans from the real SDK.

Given a worker whose Temporal runtime serves Prometheus metrics, when a person works
through a session (a pause, refused decisions, an approval), then a scrape of the
worker's endpoint shows the product's series with their labels beside the SDK's own.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import uuid
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.runtime import Runtime
from temporalio.testing import WorkflowEnvironment

from hitl import telemetry
from activities.openai_backend import OpenAIBackend
from hitl.settings import DATA_CONVERTER, Settings, connect
from tests.support.api_server import signing_key  # noqa: F401 (a fixture)
from tests.support.sessions import SECRET_KEY, Agent, eventually, pending_items, running_agent, settled
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.api_server import serving
from hitl.worker import build_worker
from workflows.metrics import reason_class

SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def free_port() -> int:
    """A port nothing listens on now (the Rust exporter cannot bind port 0 and say which it got)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def runtime_with_metrics() -> tuple[Runtime, str]:
    """A runtime serving Prometheus metrics on a free loopback port; another port if it was taken meanwhile."""
    for _ in range(5):
        address = f"127.0.0.1:{free_port()}"
        try:
            return telemetry.metrics_runtime(address), f"http://{address}/metrics"
        except telemetry.TelemetryError:
            continue
    raise AssertionError("no free port for the metrics endpoint in 5 tries")


def samples(exposition: str) -> Iterator[tuple[str, dict[str, str], float]]:
    for line in exposition.splitlines():
        if match := SAMPLE.match(line):
            yield match["name"], dict(LABEL.findall(match["labels"] or "")), float(match["value"])


def value_of(exposition: str, name: str, **labels: str) -> float | None:
    """The sum of the series called `name` whose labels include `labels`; None if there is none."""
    found = [value for sample, have, value in samples(exposition)
             if sample == name and all(have.get(key) == wanted for key, wanted in labels.items())]
    return sum(found) if found else None


async def scrape(url: str) -> str:
    async with httpx.AsyncClient() as http:
        response = await http.get(url, timeout=30)  # the worker answers between its tasks; on a busy machine, late
        response.raise_for_status()
        return response.text


@pytest.fixture
async def metered_client(env: WorkflowEnvironment) -> tuple[Client, str]:
    runtime, url = runtime_with_metrics()
    client = await Client.connect(env.client.service_client.config.target_host, namespace=env.client.namespace,
                                  data_converter=DATA_CONVERTER, runtime=runtime)
    return client, url


async def test_a_scrape_after_a_decided_pause_shows_the_products_series_with_their_labels(
    metered_client: tuple[Client, str], workspace: Path
) -> None:
    client, url = metered_client
    task_queue = f"hitl-metrics-{uuid.uuid4().hex[:8]}"
    with FakeOpenAI() as fake:
        fake.script(tool_calls(("call_1", "delete_file", {"path": "notes.txt"})), text("Deleted."))
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async with build_worker(client, task_queue, backend, workspace):
            session = await Agent(client, task_queue, workspace).start("delete notes.txt please", model="my-model")
            [item] = await pending_items(session)
            await session.signal("approve", {"call_id": "call_nobody_made", "by": "ana"})  # refused by the handler
            with pytest.raises(WorkflowUpdateFailedError):  # refused by the validator: no event, still counted
                await session.execute_update("reject_update", {"call_id": "call_nobody_made", "by": "ana"})
            await session.signal("approve", {"call_id": item["call_id"], "by": "ana"})
            await settled(session)

            def complete(text: str) -> bool:
                return (value_of(text, "hitl_pause_decision_seconds_count") or 0) >= 1 and \
                    (value_of(text, "hitl_refusals") or 0) >= 2
            exposition = await eventually(lambda: scrape(url), complete)

    assert value_of(exposition, "hitl_pauses_opened", kind="approval", tool="delete_file",
                    task_queue=task_queue, workflow_type="AgentWorkflow") == 1
    assert value_of(exposition, "hitl_pause_decision_seconds_count", kind="approval", outcome="approved") == 1
    waited = value_of(exposition, "hitl_pause_decision_seconds_sum", kind="approval", outcome="approved")
    assert waited is not None and 0 <= waited < 60
    assert value_of(exposition, "hitl_pause_decision_seconds_bucket", outcome="approved", le="60") == 1, "buckets in seconds"
    assert value_of(exposition, "hitl_refusals", verb="approve", reason="unknown_call") == 1
    assert value_of(exposition, "hitl_refusals", verb="reject", reason="unknown_call") == 1
    assert value_of(exposition, "hitl_model_call_seconds_count", model="my-model", system="openai", outcome="ok") == 2
    assert value_of(exposition, "hitl_model_tokens", model="my-model", type="input") == 2
    assert value_of(exposition, "hitl_model_tokens", model="my-model", type="output") == 2
    # The SDK's own series come from the same endpoint.
    assert value_of(exposition, "temporal_activity_execution_latency_count", activity_type="call_model") == 2
    assert value_of(exposition, "temporal_workflow_task_execution_latency_count", task_queue=task_queue)


async def test_the_api_counts_its_requests_by_route_template_and_status(
    env: WorkflowEnvironment, workspace: Path, signing_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous, url = Runtime.default(), None
    for _ in range(5):  # as `starter.py serve` does before the API's client connects
        monkeypatch.setenv("HITL_API_METRICS_PORT", f"127.0.0.1:{free_port()}")
        try:
            url = telemetry.serve_metrics("HITL_API_METRICS_PORT")
            break
        except telemetry.TelemetryError:
            continue
    assert url is not None
    try:
        async for agent in running_agent(env.client, workspace):
            async with serving(agent) as api:
                started = await api.start("ana", "hello")
                async with api.as_("ana") as http:
                    assert (await http.get(f"/sessions/{started['session_id']}")).status_code == 200
                async with api.as_(None) as stranger:
                    assert (await stranger.get(f"/sessions/{started['session_id']}")).status_code == 401
        exposition = await scrape(url)
    finally:
        Runtime.set_default(previous, error_if_already_set=False)

    assert value_of(exposition, "hitl_api_requests", method="POST", route="/sessions", status="201") == 1
    assert value_of(exposition, "hitl_api_requests", method="GET", route="/sessions/{session_id}", status="200") == 1
    assert value_of(exposition, "hitl_api_requests", method="GET", route="/sessions/{session_id}", status="401") == 1
    assert value_of(exposition, "hitl_api_request_seconds_count", route="/sessions") == 1
    assert started["session_id"] not in exposition, "a label per session would be a series per session"


def test_a_refusal_is_counted_by_the_class_of_its_reason_never_its_text() -> None:
    classes = {
        "unknown call_id 'call_9'": "unknown_call",
        "bo may not decide delete_file; approvers: ana": "not_permitted",
        "four-eyes rule: bo asked for this call and cannot approve it": "not_permitted",
        "the proof was issued before the session was reset (2026-12-01T10:00:00+00:00); ask for a new one": "proof",
        "the session is being cancelled; no decision is accepted": "closed",
        "call_1 is already settled (approved)": "conflict",
        "malformed approve: by: Input should be a valid string": "malformed",
        "3 calls are pending (call_1, call_2, call_3); say which call_id to approve": "malformed",
        "4 messages already wait for the agent; send this one once they are taken in": "busy",
        "internal error: KeyError": "internal_error",
        "something new": "other",
    }
    assert {reason: reason_class(reason) for reason in classes} == classes


def test_a_metrics_setting_is_a_port_or_an_address() -> None:
    assert telemetry.bind_address("9464") == "0.0.0.0:9464"
    assert telemetry.bind_address("127.0.0.1:9464") == "127.0.0.1:9464"
    for wrong in ("", "metrics", "0", "70000", "host:"):
        with pytest.raises(telemetry.TelemetryError):
            telemetry.bind_address(wrong)


def test_both_are_off_by_default() -> None:
    assert telemetry.start("hitl-test", "HITL_METRICS_PORT", environ={}) == []
    assert telemetry.client_interceptors(environ={}) == []
    sdk_installed = find_spec("opentelemetry.sdk") is not None  # without it an endpoint alone is only warned about
    assert telemetry.tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}) == sdk_installed
    assert telemetry.tracing_wanted({"HITL_OTEL": "1"})
    assert not telemetry.tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "HITL_OTEL": "0"})


# ------------------------------------------------------------------ traces


@pytest.fixture(scope="module")
def spans() -> Any:
    """The real OpenTelemetry SDK, keeping every finished span in memory (set once per process)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another tracer provider was installed first"
    return exporter


async def test_one_trace_runs_from_the_api_request_through_the_workflow_to_the_model_and_the_tool(
    env: WorkflowEnvironment, workspace: Path, signing_key: str, spans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_OTEL", "1")
    assert telemetry.start("hitl-test", None) == ["traces: spans go to the tracer provider already installed"]
    settings = dataclasses.replace(Settings.from_env(), connection={
        "target_host": env.client.service_client.config.target_host, "namespace": env.client.namespace})
    client = await connect(settings)  # as the worker, the API and the starter connect: traced
    with FakeOpenAI() as fake:
        fake.script(tool_calls(("call_1", "delete_file", {"path": "notes.txt"})), text("Deleted."))
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async for agent in running_agent(client, workspace, backend):
            async with serving(agent) as api:
                started = await api.start("ana", "delete notes.txt please", model="my-model")
                session = client.get_workflow_handle(started["session_id"])
                [item] = await pending_items(session)
                async with api.as_("ana") as http:
                    answer = await http.post(f"/sessions/{session.id}/calls/{item['call_id']}/approve", json={})
                assert answer.status_code == 200, answer.text
                await settled(session)

    finished = spans.get_finished_spans()
    by_name = {span.name: span for span in finished}
    request = by_name["POST /sessions"]
    assert request.kind.name == "SERVER" and request.parent is None
    assert request.attributes["http.route"] == "/sessions" and request.attributes["http.response.status_code"] == 201
    in_trace = {span.name: span for span in finished if span.context.trace_id == request.context.trace_id}
    for name in ("StartUpdateWithStartWorkflow:AgentWorkflow", "RunWorkflow:AgentWorkflow", "StartActivity:call_model",
                 "RunActivity:call_model", "chat my-model", "StartActivity:run_tool", "RunActivity:run_tool"):
        assert name in in_trace, f"{name} is not in the request trace: {sorted(in_trace)}"
    chat = in_trace["chat my-model"]
    assert chat.parent.span_id == in_trace["RunActivity:call_model"].context.span_id
    assert chat.kind.name == "CLIENT"
    assert {key: chat.attributes[key] for key in ("gen_ai.operation.name", "gen_ai.system", "gen_ai.request.model",
                                                   "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")} == {
        "gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "my-model",
        "gen_ai.usage.input_tokens": 1, "gen_ai.usage.output_tokens": 1}
    approve = by_name["POST /sessions/{session_id}/calls/{call_id}/approve"]
    update = next(span for span in finished if span.name == "StartWorkflowUpdate:approve_update")
    assert update.context.trace_id == approve.context.trace_id, "the approval's Update joins the approval's request"
