"""Two API replicas on one real redis-server (HITL_API_STATE), behind a round-robin proxy that
sends every request to the other replica than the last (tests/support/round_robin.py). In a
real headless Chromium ana signs in at the real OpenID provider (the sign-in starts on one
replica and comes back to the other), sees her inbox, follows the session's live events (the
ticket bought on one replica opens the stream on the other) and approves the call. One replica
is restarted mid-way: she stays signed in. She signs out on one replica and her cookie is worth
nothing on either."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.api.oidc import OpenIDProvider
from hitl.api.web_sign_in import SESSION_COOKIE, WebSignIn
from hitl.devserver import free_port
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.browser import NEEDS_CHROMIUM, approve_and_confirm, browser, click, until  # noqa: F401  (browser: a fixture)
from tests.support.openid import AUDIENCE, OpenID, openid  # noqa: F401  (fixtures)
from tests.support.redis_server import RedisServer, redis_server  # noqa: F401  (fixtures)
from tests.support.round_robin import RoundRobin
from tests.support.sessions import Agent, eventually, running_agent

pytestmark = NEEDS_CHROMIUM

ANA = "ana@example.com"


class Replicas:
    """API replicas on fixed-for-the-test ports, each its own app (its own state client), which
    can be stopped and started again on the same port as a deploy restarts one."""

    def __init__(self, agent: Agent, openid: OpenID, count: int = 2) -> None:
        self.agent, self.openid = agent, openid
        self.ports = [free_port() for _ in range(count)]
        self.running: list[serving] = []

    def replica(self, port: int) -> serving:
        provider = OpenIDProvider(self.openid.issuer, AUDIENCE)
        return serving(self.agent, port=port, openid=provider, web_sign_in=WebSignIn(provider, "web", "openid email api"))

    async def start(self) -> list[Api]:
        self.running = [self.replica(port) for port in self.ports]
        return [await replica.__aenter__() for replica in self.running]

    async def restart(self, index: int) -> None:
        await self.running[index].__aexit__(None, None, None)
        self.running[index] = self.replica(self.ports[index])
        await self.running[index].__aenter__()

    async def stop(self) -> None:
        for replica in self.running:
            await replica.__aexit__(None, None, None)


@pytest.fixture
async def behind_proxy(env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID,
                       redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
                       ) -> AsyncIterator[tuple[Replicas, list[Api], RoundRobin]]:
    monkeypatch.setenv("HITL_API_STATE", redis_server.url)
    async for agent in running_agent(env.client, workspace):
        replicas = Replicas(agent, openid)
        apis = await replicas.start()
        try:
            async with RoundRobin(replicas.ports) as proxy:
                yield replicas, apis, proxy
        finally:
            await replicas.stop()


async def session_answers(base: str, cookie: str) -> int:
    """The status `GET /auth/session` answers the cookie with, asked of one replica directly."""
    async with httpx.AsyncClient(base_url=base, cookies={SESSION_COOKIE: cookie}) as http:
        return (await http.get("/auth/session")).status_code


async def test_ana_signs_in_decides_and_follows_events_through_two_replicas_alternating(
        behind_proxy: tuple[Replicas, list[Api], RoundRobin], browser: Any) -> None:
    replicas, (first, second), proxy = behind_proxy
    started = await first.start("olga", "please delete notes.txt", approvers={"delete_file": [ANA]}, participants=[ANA])
    session, call = started["session_id"], started["pending"][0]["call_id"]

    await asyncio.to_thread(browser.get, proxy.base + "/")
    await until(browser, click("#sso-link"))
    [login] = await until(browser, lambda b: b.find_elements("css selector", 'input[name="login"]'))
    await asyncio.to_thread(login.send_keys, "ana")
    await asyncio.to_thread(browser.find_element("css selector", 'input[name="password"]').send_keys, "any\n")
    await until(browser, click('input[name="prompt"][value="consent"] ~ button[type="submit"]'))
    await until(browser, lambda b: b.find_element("id", "who").text == f"signed in as {ANA}")
    replica_of = {path: index for index, path in proxy.served}
    assert replica_of["GET /auth/sign-in"] != replica_of["GET /auth/callback"]  # begun on one, finished on the other
    [cookie] = [c["value"] for c in await asyncio.to_thread(browser.get_cookies) if c["name"] == SESSION_COOKIE]
    assert [await session_answers(api.base, cookie) for api in (first, second)] == [200, 200]

    await replicas.restart(0)  # a deploy restarts one replica: nobody is signed out
    await asyncio.to_thread(browser.refresh)
    await until(browser, lambda b: b.find_element("id", "who").text == f"signed in as {ANA}")

    await until(browser, click(f'button.item[data-session="{session}"]'))
    await until(browser, lambda b: b.find_element("id", "stream-state").text == "(live)")
    await until(browser, lambda b: b.find_elements("css selector", '#events li[data-type="pause_opened"]'))
    card = f'.pending-item[data-call="{call}"]'
    await approve_and_confirm(browser, card)  # delete_file is destructive: Approve asks first
    await until(browser, lambda b: b.find_element("id", "decision-result").text == "approve: approved")
    await until(browser, lambda b: b.find_elements("css selector", '#events li[data-type="pause_settled"]'))
    async with first.as_("olga") as owner:
        await eventually(lambda: owner.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        audit = (await owner.get(f"/sessions/{session}/audit")).json()
    assert [event["by"] for event in audit if event["event"] == "approved"] == [ANA]
    assert not (first.agent.workspace / "notes.txt").exists()

    await until(browser, click("#sign-out"))
    await until(browser, lambda b: b.find_element("id", "sign-in").is_displayed())
    assert [await session_answers(api.base, cookie) for api in (first, second)] == [401, 401]

    served = [index for index, _ in proxy.served]
    assert all(one != next_one for one, next_one in zip(served, served[1:])), proxy.served
    assert {"GET /auth/session", "POST /auth/sign-out", f"GET /sessions/{session}/events"} <= \
        {path for _, path in proxy.served}
