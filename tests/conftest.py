"""Fixtures: a real Temporal dev server, a worker with the offline model, a workspace; and the
tiers (see pytest_collection_modifyitems). What tests share besides fixtures is tests/support/."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from activities.openai_backend import OpenAIBackend
from hitl.devserver import SERVER_FLAGS, temporal_binary
from hitl.exit_cleanly import exit_now
from hitl.settings import DATA_CONVERTER
from tests.support.fake_openai import FakeOpenAI
from tests.support.dev_environment import dev_environment
from tests.support.bounded_waits import BoundedWaits
from tests.support.patient_updates import PatientUpdates
from hitl import worker
from hitl.worker import WorkerTuning, build_worker
from workflows.agent import AgentWorkflow
from workflows.conversation import ModelReply
from workflows.requests import ModelRequest
from tests.support.sessions import (  # noqa: F401  (fixtures and hooks use them)
    T, PATIENCE, RECORD_HISTORIES_TO, SECRET_KEY, REPLAY_TIER_CACHE, Agent, running_agent, OPERATOR_CAUSES, failed_workflow_tasks, record_if_asked, MAX_RECORDED_BYTES, current_test_name, history_file_name, parse_history_file_name, eventually, query, pending_items, settled, pending_of_kind, refused_update, assert_well_formed, GatedModel,
)


TIME_SKIPPING = ["--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true"]


if REPLAY_TIER_CACHE:
    worker.DEFAULT_TUNING = WorkerTuning(max_cached_workflows=int(REPLAY_TIER_CACHE))


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await dev_environment()
    yield environment
    await environment.shutdown()


@pytest.fixture(scope="session")
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server whose workflows skip ahead in time whenever they are only waiting."""
    environment = await WorkflowEnvironment.start_time_skipping_v2(
        data_converter=DATA_CONVERTER, interceptors=[PatientUpdates(), BoundedWaits()],
        dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=[*SERVER_FLAGS, *TIME_SKIPPING],
    )
    yield environment
    await environment.shutdown()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "notes.txt").write_text("remember the milk\n")
    return folder


@pytest.fixture
async def agent(env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[Agent]:
    async for running in running_agent(env.client, workspace):
        yield running


@pytest.fixture
async def skipping_agent(skipping_env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[Agent]:
    async for running in running_agent(skipping_env.client, workspace):
        yield running


@pytest.fixture
async def openai_agent(env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[tuple[Agent, FakeOpenAI]]:
    """A worker whose model is the real openai client talking to a scripted loopback server."""
    with FakeOpenAI() as fake:
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async for running in running_agent(env.client, workspace, backend):
            yield running, fake


@pytest.fixture
async def gated_agent(env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[tuple[Agent, GatedModel]]:
    """A worker whose model calls hang until the test sets `model.gate`: a turn caught mid-thought."""
    model = GatedModel()
    async for running in running_agent(env.client, workspace, model):
        yield running, model


# A test of the integration tier (a shared dev server, in-process workers) takes seconds, a minute
# on a busy machine: past this it has hung (its waits fail sooner, with their reason; this is the
# backstop for a wait that has none). The system tier keeps pyproject's 30 minutes.
INTEGRATION_CEILING_SECONDS = 600

# A test that needs any of these runs against a real Temporal dev server.
SERVER_FIXTURES = {"env", "skipping_env"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tiers (`./test.sh -m unit` is the fast one; `./test.sh` alone runs every tier).

    The folder says what a module may use: tests/unit/ no Temporal server at all (a test there
    that asks for one is an error, not a slow unit test), tests/system/ the product's own
    processes, a browser, servers started or killed here, tests/integration/ a shared dev
    server with in-process workers. A test in tests/integration/ that needs no server (a replay
    of the corpus, a card rendered) is `unit` too, so the fast tier holds every pure test."""
    for item in items:
        folder = item.path.parent.name
        # A test that starts a server of its own (hitl.testing.Harness, as the docs show it) says so with the marker.
        needs_server = (bool(SERVER_FIXTURES & set(getattr(item, "fixturenames", ())))
                        or item.get_closest_marker("integration") is not None)
        if folder == "unit" and needs_server:
            raise pytest.UsageError(f"{item.nodeid}: a unit test needs no Temporal server; move it to tests/integration/")
        if folder == "system" or item.get_closest_marker("system"):
            item.add_marker(pytest.mark.system)
        else:
            item.add_marker(pytest.mark.integration if needs_server else pytest.mark.unit)
            if needs_server and item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(INTEGRATION_CEILING_SECONDS * PATIENCE))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Exit with pytest's own status, skipping the interpreter teardown that can
    abort after the Temporal SDK's threads (see hitl/exit_cleanly.py)."""
    status = getattr(config, "_hitl_exit_status", None)
    if status is not None:
        exit_now(int(status))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._hitl_exit_status = exitstatus  # type: ignore[attr-defined]
