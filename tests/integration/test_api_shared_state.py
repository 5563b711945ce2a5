"""Two API replicas on one real redis-server (HITL_API_STATE) keep each door's promise between
them: a stream ticket opens one stream, on whichever replica; a signed Slack request is taken
once, whichever replica it is replayed to; a person's open streams count across replicas. With
Redis stopped, what needs it answers a one-line 503 and `/healthz` is unhealthy, saying why;
started again, the same processes answer again."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import pytest
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier
from temporalio.testing import WorkflowEnvironment

from hitl.api.slack import SlackDoor
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.redis_server import RedisServer, redis_server  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent
from tests.support.slack_api import BOT_TOKEN, SIGNING_SECRET, signed

SLACK_PEOPLE = {"U0ANA": "ana"}


@asynccontextmanager
async def replicas(env: WorkflowEnvironment, workspace: Path, count: int = 2) -> AsyncIterator[list[Api]]:
    """`count` API apps, each with its own state client (HITL_API_STATE), in front of one worker."""
    async for agent in running_agent(env.client, workspace):
        async with AsyncExitStack() as stack:
            door = lambda: SlackDoor(SignatureVerifier(SIGNING_SECRET), SLACK_PEOPLE,  # noqa: E731
                                     WebClient(token=BOT_TOKEN, base_url="http://127.0.0.1:9/api/"))
            yield [await stack.enter_async_context(serving(agent, slack_door=door())) for _ in range(count)]


@pytest.fixture
def shared(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> RedisServer:
    monkeypatch.setenv("HITL_API_STATE", redis_server.url)
    monkeypatch.setenv("HITL_API_STREAMS_PER_PERSON", "2")
    return redis_server


async def test_a_stream_ticket_used_on_one_replica_is_refused_on_the_other(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, shared: RedisServer) -> None:
    async with replicas(env, workspace) as (one, other):
        session = (await one.start("ana", "hello"))["session_id"]
        async with one.as_("ana") as ana:
            ticket = (await ana.post(f"/sessions/{session}/events/ticket")).json()
            async with ana.stream("GET", ticket["url"]) as opened:
                assert opened.status_code == 200
        async with other.as_(None) as anyone:
            async with anyone.stream("GET", ticket["url"]) as again:
                assert again.status_code == 401, "the other replica opened a stream with a used ticket"
                assert "used already" in json.loads(await again.aread())["detail"]


async def test_a_signed_slack_request_replayed_to_the_other_replica_is_refused(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, shared: RedisServer) -> None:
    body, headers = signed({"type": "view_closed", "user": {"id": "U0ANA"}, "view": {"callback_id": "other"}})
    async with replicas(env, workspace) as (one, other):
        async with one.as_(None) as slack:
            assert (await slack.post("/channels/slack/interactions", content=body, headers=headers)).status_code == 200
        async with other.as_(None) as replayer:
            replayed = await replayer.post("/channels/slack/interactions", content=body, headers=headers)
    assert replayed.status_code == 401, "the other replica took a Slack request already taken"
    assert replayed.json()["detail"] == "this request was already taken once"


async def test_a_persons_open_streams_count_across_replicas(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, shared: RedisServer) -> None:
    async with replicas(env, workspace) as (one, other):
        session = (await one.start("ana", "hello"))["session_id"]
        events = f"/sessions/{session}/events"
        async with one.as_("ana") as on_one, other.as_("ana") as on_other:
            async with on_one.stream("GET", events) as first, on_other.stream("GET", events) as second:
                assert (first.status_code, second.status_code) == (200, 200)
                for replica in (on_one, on_other):  # her limit is 2, whichever replica she asks
                    async with replica.stream("GET", events) as third:
                        assert third.status_code == 429, "a replica counted only its own streams"
                        assert "HITL_API_STREAMS_PER_PERSON" in json.loads(await third.aread())["detail"]
            # Both closed: each replica gives its slot back to the shared count once it sees its close.
            held = one.app.state.streams.key("ana")
            await eventually(lambda: one.app.state.api_state.get(held), lambda count: count is None)
            async with on_other.stream("GET", events) as again:
                assert again.status_code == 200


async def test_redis_stopped_is_a_one_line_503_and_an_unhealthy_check_and_started_again_it_recovers(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, shared: RedisServer) -> None:
    async with replicas(env, workspace, count=1) as (api,):
        session = (await api.start("ana", "hello"))["session_id"]
        async with api.as_("ana") as ana:
            assert (await ana.get("/healthz")).json()["ok"] is True
            shared.stop()
            read = await ana.get(f"/sessions/{session}")
            assert read.status_code == 503, "the API answered without the shared state it needs"
            detail = read.json()["detail"]
            assert "Redis" in detail and "\n" not in detail, detail
            health = await ana.get("/healthz")
            assert health.status_code == 503 and health.json()["ok"] is False
            assert "Redis" in health.json()["problem"]
            ticket = await ana.post(f"/sessions/{session}/events/ticket")
            assert ticket.status_code == 503  # a read first: its slot is counted in Redis

            shared.start()  # the same port: the same processes reconnect
            await eventually(lambda: ana.get("/healthz"), lambda answer: answer.status_code == 200)
            again = await ana.get(f"/sessions/{session}")
            assert again.status_code == 200, again.text
