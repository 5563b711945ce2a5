"""Deciding from a mail: the worker mails ana the pause through a real SMTP server on loopback,
and a real headless Chromium follows the link in the mail she received to the API. Opening a link
decides nothing; the page's one button decides, as ana, via email, once. A scanner's GET, a reused
link, an altered link and a link of a call settled elsewhere each get a page that says why, and
decide nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.mail import mail_messages
from activities.offline_model import OfflineModel
from activities.slack import slack_messages
from hitl.api.slack import slack_door
from hitl.channels import channels_from_env
from hitl.decision_keys import worker_email_link_key
from hitl.worker import build_worker
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.browser import NEEDS_CHROMIUM, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)
from tests.support.mail_server import Inbox, links_in, mail_server
from tests.support.mail_server import text_of as mail_text
from tests.support.sessions import Agent, eventually, pending_items
from tests.support.slack_api import BOT_TOKEN, SIGNING_SECRET, signed, slack_api
from tests.support.slack_api import click as slack_click

pytestmark = NEEDS_CHROMIUM
ANA = "ana@example.com"


@pytest.fixture
async def mailing_api(env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str
                      ) -> AsyncIterator[tuple[Api, Inbox]]:
    """The API, and a worker that mails pauses to ana through a loopback SMTP server with links to
    that API; the worker's link key derived from the same signing key as the API's."""
    agent = Agent(env.client, "mail-decisions", workspace)
    with mail_server() as inbox:
        api = serving(agent)
        path = tmp_path / "channels.json"
        path.write_text(json.dumps({"public_url": api.base, "people": {"ana": {"email": ANA}},
                                    "email": {"smtp_url": inbox.url, "from": "agent@example.com"}}))
        environ = {"HITL_CHANNELS": str(path)}
        mail = mail_messages(channels_from_env(environ), environ, worker_email_link_key)
        async with build_worker(env.client, agent.task_queue, OfflineModel(), workspace, message_channels=mail):
            async with api as running:
                yield running, inbox


async def mailed_links(api: Api, inbox: Inbox) -> tuple[str, str, dict[str, str]]:
    """A session of olga's whose delete_file ana approves; the session, the call and ana's links."""
    started = await api.start("olga", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    [mail] = await eventually(lambda: asyncio.sleep(0, inbox.to(ANA)), bool)
    return started["session_id"], started["pending"][0]["call_id"], links_in(mail)


async def settled_note(inbox: Inbox) -> str:
    """The text of the one short mail ana got once the pause was settled."""
    [mail] = await eventually(lambda: asyncio.sleep(0, [m for m in inbox.settled() if m["To"] == ANA]), bool)
    return mail_text(mail)


async def still_pending(api: Api, session_id: str) -> list[dict[str, Any]]:
    return await pending_items(api.agent.client.get_workflow_handle(session_id))


async def tool_runs(api: Api, session_id: str) -> int:
    history = await api.agent.client.get_workflow_handle(session_id).fetch_history()
    return sum(1 for event in history.events if event.HasField("activity_task_scheduled_event_attributes")
               and event.activity_task_scheduled_event_attributes.activity_type.name == "run_tool")


async def audit_of(api: Api, session_id: str) -> list[dict[str, Any]]:
    async with api.as_("olga") as http:
        return (await http.get(f"/sessions/{session_id}/audit")).json()


async def test_ana_opens_the_link_in_her_mail_and_approves_with_one_click(
    mailing_api: tuple[Api, Inbox], browser: Any
) -> None:
    api, inbox = mailing_api
    session_id, call_id, links = await mailed_links(api, inbox)
    assert sorted(links) == ["Approve", "Reject"] and links["Approve"].startswith(api.base + "/decide/")

    await asyncio.to_thread(browser.get, links["Approve"])
    [button] = await until(browser, find("form button[data-choice=approve]"))
    assert button.text == "Approve" and "please delete notes.txt" in text_of("[data-role=card]")(browser)
    # Opening the link decided nothing: the call still waits.
    assert [item["call_id"] for item in await still_pending(api, session_id)] == [call_id]

    await until(browser, click("form button[data-choice=approve]"))
    outcome = await until(browser, text_of("[data-role=outcome]"))
    assert outcome == "Approve on delete_file, decided by ana via email.", outcome
    await eventually(lambda: asyncio.sleep(0, (api.agent.workspace / "notes.txt").exists()), lambda exists: not exists)
    [approved] = [event for event in await audit_of(api, session_id) if event["event"] == "approved"]
    assert (approved["call_id"], approved["by"], approved["via"]) == (call_id, "ana", "email")
    assert await tool_runs(api, session_id) == 1
    assert (await settled_note(inbox)).startswith("settled: approved by ana via email\n")

    # Used: the link and the other link of that mail say who settled the call, and decide nothing.
    async with httpx.AsyncClient() as http:
        for url in links.values():
            for method in ("GET", "POST"):
                again = await http.request(method, url)
                assert again.status_code == 409, (method, again.text)
                assert "already settled (approved by ana via email" in again.text
    assert await tool_runs(api, session_id) == 1


async def test_a_link_decides_nothing_when_scanned_altered_or_the_call_was_settled_elsewhere(
    mailing_api: tuple[Api, Inbox]
) -> None:
    api, inbox = mailing_api
    session_id, call_id, links = await mailed_links(api, inbox)
    async with httpx.AsyncClient() as http:
        # A mail scanner opens every link: each answers the card, and nothing is decided.
        for url in links.values():
            scanned = await http.get(url)
            assert scanned.status_code == 200 and "Opening this page decided nothing" in scanned.text
            assert scanned.headers["referrer-policy"] == "no-referrer" and scanned.headers["cache-control"] == "no-store"
        assert [item["call_id"] for item in await still_pending(api, session_id)] == [call_id]

        token = links["Approve"].rsplit("/", 1)[1]
        altered = f"{links['Approve'][:-len(token)]}{token[:-3]}{'AAA' if token[-3:] != 'AAA' else 'BBB'}"
        for method in ("GET", "POST"):
            refused = await http.request(method, altered)
            assert refused.status_code == 400 and "decides nothing" in refused.text, refused.text
        assert [item["call_id"] for item in await still_pending(api, session_id)] == [call_id]

        # Settled elsewhere: ana rejects it through the API; her mail's approve link says so.
        async with api.as_("ana") as ana:
            assert (await ana.post(f"/sessions/{session_id}/calls/{call_id}/reject", json={})).status_code == 200
        for method in ("GET", "POST"):
            late = await http.request(method, links["Approve"])
            assert late.status_code == 409 and "already settled (rejected by ana via api" in late.text, late.text
    assert (await settled_note(inbox)).startswith("settled: rejected by ana via api\n")
    assert await tool_runs(api, session_id) == 0
    assert (api.agent.workspace / "notes.txt").exists()


async def test_a_mails_links_make_one_decision_even_while_the_call_still_waits(
    mailing_api: tuple[Api, Inbox]
) -> None:
    """Given a call two people must approve, when ana approves from her mail, then her approval
    counts and the call waits for the second; her mail's links are used up: its reject link, or the
    approve link again, decide nothing (410) and her approval stands."""
    api, inbox = mailing_api
    started = await api.start("olga", "please delete notes.txt", approvers={"delete_file": ["ana", "bob"]},
                              required_approvals={"delete_file": 2})
    session_id, call_id = started["session_id"], started["pending"][0]["call_id"]
    [mail] = await eventually(lambda: asyncio.sleep(0, inbox.to(ANA)), bool)
    links = links_in(mail)
    async with httpx.AsyncClient() as http:
        assert (await http.post(links["Approve"])).status_code == 200
        [item] = await still_pending(api, session_id)
        assert item["call_id"] == call_id and item["approvals"] == ["ana"]
        for url in (links["Reject"], links["Approve"]):
            reused = await http.post(url)
            assert reused.status_code == 410 and "links were used already" in reused.text, reused.text
    [item] = await still_pending(api, session_id)
    assert item["approvals"] == ["ana"] and await tool_runs(api, session_id) == 0


async def test_ana_approves_in_slack_and_her_mail_says_so(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str
) -> None:
    """Given a pause that reaches ana in Slack and by mail, when she approves from Slack, then the
    tool runs once, she gets a short mail 'settled: approved by ana via slack', and the links of
    her first mail say so and decide nothing."""
    agent = Agent(env.client, "mail-and-slack", workspace)
    with mail_server() as inbox, slack_api() as slack:
        api = serving(agent, slack_door=None)
        path = tmp_path / "channels.json"
        path.write_text(json.dumps({
            "public_url": api.base, "people": {"ana": {"email": ANA, "slack": "U0ANA"}},
            "email": {"smtp_url": inbox.url, "from": "agent@example.com"},
            "slack": {"bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET",
                      "channel": "C0APPROVALS", "api_url": slack.base_url}}))
        environ = {"HITL_CHANNELS": str(path), "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
        channels = channels_from_env(environ)
        api.app.state.slack = slack_door(channels, environ)  # the file names the API's address: the door comes after
        channels_shown = [*slack_messages(channels, environ), *mail_messages(channels, environ, worker_email_link_key)]
        async with build_worker(env.client, agent.task_queue, OfflineModel(), workspace, message_channels=channels_shown):
            async with api as running:
                session_id, _, links = await mailed_links(running, inbox)
                posted = await eventually(lambda: asyncio.sleep(0, slack.answered("chat.postMessage")), bool)
                [card] = [{**call.arguments, "channel": call.answer["channel"], "ts": call.answer["ts"]}
                          for call in posted if call.answer is not None]
                body, headers = signed(slack_click("U0ANA", card, "approve"))
                async with running.as_(None) as http:
                    clicked = await http.post("/channels/slack/interactions", content=body, headers=headers)
                    assert clicked.status_code == 200, clicked.text
                assert (await settled_note(inbox)).startswith("settled: approved by ana via slack\n")
                async with httpx.AsyncClient() as web:
                    late = await web.get(links["Reject"])
                assert late.status_code == 409 and "already settled (approved by ana via slack" in late.text, late.text
                assert await tool_runs(running, session_id) == 1
