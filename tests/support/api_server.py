"""The HTTP API under uvicorn on a loopback port, in the test's own event loop, against the
real dev server and a worker with the offline model; people and their tokens.

Test modules import the `api` fixture from here (pytest finds fixtures a module imports).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx2 as httpx
import pytest
import uvicorn
from temporalio.testing import WorkflowEnvironment

from hitl.api.app import create_app
from hitl.api.auth import TokenBook
from hitl.devserver import free_port
from activities.openai_backend import OpenAIBackend
from tests.support.sessions import SECRET_KEY, Agent, running_agent
from tests.support.fake_openai import FakeOpenAI
from tests.support.patient_updates import without_patience

PEOPLE = ("ana", "bob", "carol", "dave", "olga")


def token_of(person: str) -> str:
    return f"token-of-{person}-0123456789abcdef"


@dataclass
class Api:
    """A running API: its base URL, the worker behind it, and an httpx client per person."""

    base: str
    agent: Agent
    app: Any

    def as_(self, person: str | None, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
        """A client that speaks as `person` (None: no token), with any other headers given."""
        sent = {"Authorization": f"Bearer {token_of(person)}"} if person else {}
        return httpx.AsyncClient(base_url=self.base, headers={**sent, **(headers or {})}, timeout=60)

    async def start(self, person: str, message: str, **options: Any) -> dict[str, Any]:
        """POST /sessions as `person`; the 201's body."""
        async with self.as_(person) as http:
            answer = await http.post("/sessions", json={"message": message, "session_id": new_id(), **options})
        assert answer.status_code == 201, answer.text
        return answer.json()


def write_tokens(path: Path, people: tuple[str, ...] = PEOPLE) -> Path:
    """A tokens file as an operator keeps one: `{"<token>": "<person>"}`."""
    path.write_text(json.dumps({token_of(person): person for person in people}))
    return path


def new_id() -> str:
    return f"api-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def signing_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """One key for the API (signs) and the worker (trusts), as on one machine."""
    seed = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("HITL_SIGNING_KEY", f"test:{seed}")
    monkeypatch.setenv("HITL_KEYS_DIR", str(tmp_path / "keys"))
    return seed


@pytest.fixture
async def api(env: WorkflowEnvironment, workspace: Path, signing_key: str) -> AsyncIterator[Api]:
    async for agent in running_agent(env.client, workspace):
        async with serving(agent) as running:
            yield running


@pytest.fixture
async def scripted_api(env: WorkflowEnvironment, workspace: Path, signing_key: str) -> AsyncIterator[tuple[Api, FakeOpenAI]]:
    """The API in front of a worker whose model is a scripted OpenAI-compatible server."""
    with FakeOpenAI() as fake:
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async for agent in running_agent(env.client, workspace, backend):
            async with serving(agent) as running:
                yield running, fake


class serving:
    """`async with serving(agent)`: uvicorn with the API on a free loopback port, stopped after.
    `app_options` go to create_app (e.g. `policy=`, or `tokens=None` for HITL_API_TOKENS' file);
    `agent=None` serves an API with no Temporal; `port` when its address must be known before
    (a channels file's public_url)."""

    def __init__(self, agent: Agent | None, *, port: int | None = None, **app_options: Any) -> None:
        tokens = app_options.pop("tokens", TokenBook({token_of(person): person for person in PEOPLE}, "test tokens"))
        app_options.setdefault("policy", None)
        if agent is not None:
            app_options.update(client=without_patience(agent.client), task_queue=agent.task_queue)
        self.app = create_app(tokens=tokens, **app_options)
        self.agent = agent
        port = port or free_port()
        self.server = uvicorn.Server(uvicorn.Config(
            self.app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1,
        ))
        self.base = f"http://127.0.0.1:{port}"
        self.port = port

    async def __aenter__(self) -> Api:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.02)
        return Api(self.base, self.agent, self.app)  # type: ignore[arg-type]

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 15)


class EventStream:
    """The server-sent events of one streamed response, read in several goes (one line reader for
    the whole response: abandoning a reader would close the connection)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.events = self.parse()

    async def parse(self) -> AsyncIterator[dict[str, Any]]:
        """Each event as {"event", "id", "data"} with its data parsed as JSON; pings skipped."""
        event: dict[str, Any] = {}
        async for line in self.response.aiter_lines():
            if not line.strip():
                if "data" in event:
                    event["data"] = json.loads(event["data"])
                    yield event
                event = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                event[name] = value[1:] if value.startswith(" ") else value

    async def read_until(self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 30) -> list[dict[str, Any]]:
        """Events until `done(events so far)`; fails after `timeout` seconds or if the stream ends."""
        seen: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + timeout
        while not done(seen):
            left = deadline - asyncio.get_running_loop().time()
            try:
                seen.append(await asyncio.wait_for(self.events.__anext__(), max(left, 0.001)))
            except asyncio.TimeoutError:
                raise AssertionError(f"not done within {timeout}s: {seen}") from None
            except StopAsyncIteration:
                raise AssertionError(f"the stream ended first: {seen}") from None
        return seen


async def read_until(response: httpx.Response, done: Callable[[list[dict[str, Any]]], bool],
                     timeout: float = 30) -> list[dict[str, Any]]:
    """For a response read once: its events until `done`."""
    return await EventStream(response).read_until(done, timeout)


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event"] == kind]
