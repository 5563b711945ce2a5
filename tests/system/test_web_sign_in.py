"""The web inbox signs in through a real OpenID provider (tests/js/oidc_provider.mjs) in a real
headless Chromium: ana follows "Sign in with your organisation", signs in at the provider's own
pages and lands back in her inbox, which the page reaches with an HttpOnly, SameSite=Strict
cookie it cannot read; she approves from it as ana@example.com. A request with her cookie but
without the page's CSRF token, or from another origin, decides nothing; signing out ends the
session on the server (the cookie is worth nothing after) and leaves nothing of hers on the page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.api.oidc import OpenIDProvider
from hitl.api.web_sign_in import SESSION_COOKIE, WebSignIn
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.openid import AUDIENCE, OpenID, openid  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent
from tests.support.browser import NEEDS_CHROMIUM, approve_and_confirm, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)

pytestmark = NEEDS_CHROMIUM

ANA = "ana@example.com"


@pytest.fixture
async def web_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID) -> AsyncIterator[Api]:
    provider = OpenIDProvider(openid.issuer, AUDIENCE)
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, openid=provider, web_sign_in=WebSignIn(provider, "web", "openid email api")) as running:
            yield running


async def test_ana_signs_in_at_her_provider_decides_from_the_inbox_and_signs_out(web_api: Api, browser: Any) -> None:
    started = await web_api.start("olga", "please delete notes.txt", approvers={"delete_file": [ANA]})
    session, call = started["session_id"], started["pending"][0]["call_id"]

    await asyncio.to_thread(browser.get, web_api.base + "/")
    await until(browser, click("#sso-link"))
    [login] = await until(browser, find('input[name="login"]'))  # the provider's own login page
    await asyncio.to_thread(login.send_keys, "ana")
    await asyncio.to_thread(browser.find_element("css selector", 'input[name="password"]').send_keys, "any\n")
    # The provider asks her to consent on a page of its own: wait for that page, not for any submit
    # button (the login page's own is still there while the browser posts the password).
    await until(browser, click('input[name="prompt"][value="consent"] ~ button[type="submit"]'))
    await until(browser, lambda b: b.find_element("id", "who").text == f"signed in as {ANA}")

    [cookie] = [c for c in await asyncio.to_thread(browser.get_cookies) if c["name"] == SESSION_COOKIE]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert SESSION_COOKIE not in await asyncio.to_thread(browser.execute_script, "return document.cookie")
    assert await asyncio.to_thread(browser.execute_script, "return sessionStorage.length") == 0  # no token in the tab

    # Her cookie alone decides nothing: not without the page's CSRF token, not from another origin.
    jar = {SESSION_COOKIE: cookie["value"]}
    async with httpx.AsyncClient(base_url=web_api.base, cookies=jar) as forger:
        assert (await forger.get("/me")).json()["person"] == ANA
        without_token = await forger.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert without_token.status_code == 403 and "X-CSRF-Token" in without_token.json()["detail"]
        csrf = (await forger.get("/auth/session")).json()["csrf"]
        elsewhere = await forger.post(f"/sessions/{session}/calls/{call}/approve", json={},
                                      headers={"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"})
        assert elsewhere.status_code == 403 and "another origin" in elsewhere.json()["detail"]
    assert (web_api.agent.workspace / "notes.txt").exists()

    await until(browser, click(f'button.item[data-session="{session}"]'))
    card = f'.pending-item[data-call="{call}"]'
    await approve_and_confirm(browser, card)  # delete_file is destructive
    await until(browser, lambda b: b.find_element("id", "decision-result").text == "approve: approved")
    async with web_api.as_("olga") as owner:
        await eventually(lambda: owner.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        audit = (await owner.get(f"/sessions/{session}/audit")).json()
    assert not (web_api.agent.workspace / "notes.txt").exists()
    assert [event["by"] for event in audit if event["event"] == "approved"] == [ANA]

    await until(browser, click("#sign-out"))
    await until(browser, lambda b: b.find_element("id", "sign-in").is_displayed())
    assert session not in browser.page_source and ANA not in browser.page_source
    async with httpx.AsyncClient(base_url=web_api.base, cookies=jar) as replayed:  # the old cookie, kept elsewhere
        gone = await eventually(lambda: replayed.get("/me"), lambda answer: answer.status_code == 401)
    assert "Authorization" in gone.json()["detail"] or "token" in gone.json()["detail"]
