"""Changing a tool's approval setting on the worker is safe for sessions already running.

The catalog's verdict on each call (does it need approval, do its arguments
fit) is recorded with the model's reply, so a session replays with the
setting it ran with, and only new calls see the new one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.tools import CATALOG, tool
from tests.support.sessions import Agent, pending_items, running_agent, settled
from tests.support.replaying import worker_replayer
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest


@tool
def water_plants(bed: str) -> str:
    """Water one flower bed (runs without asking, until an operator decides otherwise)."""
    return f"Watered the {bed} bed."


class GardenerModel:
    """Waters the roses when the user speaks, then says so."""

    description = "a scripted gardener"

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.messages[-1].role == "user":
            call = ToolCall(id="", function=FunctionCall(name="water_plants", arguments=json.dumps({"bed": "roses"})))
            return ModelReply(tool_calls=[call])
        return ModelReply(content=f"Done: {request.messages[-1].content}")


@pytest.fixture
async def gardener(env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[Agent]:
    async for running in running_agent(env.client, workspace, GardenerModel()):
        yield running


@pytest.fixture
def water_plants_needs_approval() -> AsyncIterator[None]:
    spec = CATALOG.get("water_plants")
    assert spec is not None
    CATALOG.add(dataclasses.replace(spec, needs_approval=True))
    yield
    CATALOG.add(spec)


async def test_a_session_replays_after_its_tool_starts_needing_approval(
    gardener: Agent, request: pytest.FixtureRequest
) -> None:
    session = await gardener.start("water the roses", tools=["water_plants"])
    status = await settled(session)
    assert status["last_answer"] == "Done: Watered the roses bed."
    history = await session.fetch_history()

    request.getfixturevalue("water_plants_needs_approval")
    replayer = worker_replayer()
    await replayer.replay_workflow(history)  # raises on nondeterminism

    later = await gardener.start("water the roses again", tools=["water_plants"])
    [item] = await pending_items(later)
    assert item["tool"] == "water_plants" and item["kind"] == "approval", "new calls follow the new setting"
