"""A decision made outside a session (a mail link, a Slack button, a proof the API signed) counts
only in the chain of runs it was issued in: the session's first run and the runs it continued as
new into. A session closed and started again under its id, here straight through Temporal, is
another chain, and what was issued for the old one decides nothing in it. The API never starts a
session under the id of one that exists, running or closed (409)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import AsyncIterator

import httpx2 as httpx
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from activities.mail import mail_messages
from activities.offline_model import OfflineModel
from hitl.api.auth import TokenBook
from hitl.channels import channels_from_env
from hitl.decision_keys import worker_email_link_key
from hitl.worker import build_worker
from tests.integration.test_slack import slack_world, tool_runs as slack_tool_runs
from tests.support.api_server import PEOPLE, Api, new_id, serving, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.mail_server import Inbox, links_in, mail_server
from tests.support.slack_api import signed, submit_edit
from tests.support.sessions import Agent, eventually, pending_items, refused_update

MAIL = {"ana": "ana@example.com", "bob": "bob@example.com"}
TWO_OF_ONCALL = {"approvers": {"delete_file": ["ana", "bob"]}, "required_approvals": {"delete_file": 2}}


@pytest.fixture
async def mailing_api(env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str
                      ) -> AsyncIterator[tuple[Api, Inbox]]:
    """The API (mallory among its people), and a worker that mails pauses to ana and bob through a
    loopback SMTP server with links to that API, its link key derived from the API's signing key."""
    agent = Agent(env.client, f"chains-{new_id()}", workspace)
    with mail_server() as inbox:
        api = serving(agent, tokens=TokenBook({token_of(p): p for p in (*PEOPLE, "mallory")}, "test tokens"))
        path = tmp_path / "channels.json"
        path.write_text(json.dumps({"public_url": api.base,
                                    "people": {person: {"email": address} for person, address in MAIL.items()},
                                    "email": {"smtp_url": inbox.url, "from": "agent@example.com"}}))
        environ = {"HITL_CHANNELS": str(path)}
        mail = mail_messages(channels_from_env(environ), environ, worker_email_link_key)
        async with build_worker(env.client, agent.task_queue, OfflineModel(), workspace, message_channels=mail):
            async with api as running:
                yield running, inbox


async def cards_to(inbox: Inbox, person: str, count: int) -> list[dict[str, str]]:
    """The decision links of each card `person` was mailed, once there are `count` of them."""
    mails = await eventually(lambda: asyncio.sleep(0, inbox.to(MAIL[person])), lambda seen: len(seen) >= count)
    return [links_in(mail) for mail in mails]


async def closed(api: Api, session_id: str) -> None:
    handle = api.agent.client.get_workflow_handle(session_id)
    await eventually(handle.describe, lambda described: described.status != WorkflowExecutionStatus.RUNNING)


async def cancel(api: Api, person: str, session_id: str) -> None:
    async with api.as_(person) as http:
        answer = await http.post(f"/sessions/{session_id}/cancel", json={})
    assert answer.status_code == 200, answer.text
    await closed(api, session_id)


async def tool_runs(api: Api, session_id: str) -> int:
    history = await api.agent.client.get_workflow_handle(session_id).fetch_history()
    return sum(event.activity_task_scheduled_event_attributes.activity_type.name == "run_tool"
               for event in history.events if event.HasField("activity_task_scheduled_event_attributes"))


async def test_mail_links_of_a_closed_session_decide_nothing_in_a_new_one_under_its_id(
    mailing_api: tuple[Api, Inbox]
) -> None:
    """Given mallory's session whose delete_file needs ana and bob, both mailed, and ana rejecting it
    through the API; when mallory cancels it and starts a new session under the same id, straight
    through Temporal, with the same message (the same call, the same arguments), then the approve
    links of the first mails decide nothing there (410, opened or pressed), the file is still there,
    and the new mails' links decide in the new session."""
    api, inbox = mailing_api
    async with api.as_("mallory") as mallory:
        first = await mallory.post("/sessions", json={"message": "please delete notes.txt", "session_id": new_id(),
                                                      **TWO_OF_ONCALL})
    assert first.status_code == 201, first.text
    session_id, [call] = first.json()["session_id"], first.json()["pending"]
    [ana_first] = await cards_to(inbox, "ana", 1)
    [bob_first] = await cards_to(inbox, "bob", 1)
    async with api.as_("ana") as ana:
        rejected = await ana.post(f"/sessions/{session_id}/calls/{call['call_id']}/reject", json={})
    assert rejected.status_code == 200, rejected.text
    await cancel(api, "mallory", session_id)

    again = await api.agent.start("please delete notes.txt", session_id=session_id, by="mallory",
                                  verified_decisions=True, **TWO_OF_ONCALL)
    [waiting] = await pending_items(again)
    assert (waiting["call_id"], waiting["args_sha256"]) == (call["call_id"], call["args_sha256"])
    [_, ana_new] = await cards_to(inbox, "ana", 2)

    async with httpx.AsyncClient() as web:
        for links in (ana_first, bob_first):
            for method in ("GET", "POST"):
                refused = await web.request(method, links["Approve"])
                assert refused.status_code == 410, (method, refused.status_code, refused.text)
                assert "earlier session" in refused.text, refused.text
        [still] = await pending_items(again)
        assert still["approvals"] == [] and (api.agent.workspace / "notes.txt").exists()
        assert await tool_runs(api, session_id) == 0

        approved = await web.post(ana_new["Approve"])
        assert approved.status_code == 200, approved.text
    [counted] = await pending_items(again)
    assert counted["approvals"] == ["ana"] and (api.agent.workspace / "notes.txt").exists()


async def test_a_mail_link_still_decides_after_its_session_handed_over_to_a_new_run(
    mailing_api: tuple[Api, Inbox]
) -> None:
    """A hand-over (continue-as-new) is the same chain of runs: ana's link, mailed in the first run,
    approves in the next one."""
    api, inbox = mailing_api
    started = await api.start("olga", "please delete notes.txt", approvers={"delete_file": ["ana"]},
                              continue_as_new_after_events=20)
    session_id = started["session_id"]
    [links] = await cards_to(inbox, "ana", 1)
    handle = api.agent.client.get_workflow_handle(session_id)
    first_run = (await handle.describe()).run_id

    async def nudged() -> str:
        """Each signal wakes the waiting run; once its history is long, it hands over."""
        await handle.signal("reject", {"call_id": "nobody-asked"})
        return (await handle.describe()).run_id

    await eventually(nudged, lambda run_id: run_id != first_run, every=0.2)
    async with api.as_("ana") as ana:  # the new run has said what waits in it (its memo): ana may see it
        await eventually(lambda: ana.get(f"/sessions/{session_id}/pending"), lambda answer: answer.status_code == 200)
    async with httpx.AsyncClient() as web:
        approved = await web.post(links["Approve"])
    assert approved.status_code == 200, approved.text
    await eventually(lambda: asyncio.sleep(0, (api.agent.workspace / "notes.txt").exists()), lambda exists: not exists)


async def test_the_api_starts_no_session_under_the_id_of_one_that_exists(mailing_api: tuple[Api, Inbox]) -> None:
    """Given olga's session, POST /sessions under its id answers 409 with one line while it runs and
    once it is closed; the closed session stays hers to read, its history whole."""
    api, _ = mailing_api
    started = await api.start("olga", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    session_id = started["session_id"]
    body = {"message": "please delete notes.txt", "session_id": session_id}
    async with api.as_("mallory") as mallory:
        running = await mallory.post("/sessions", json=body)
        assert running.status_code == 409 and "\n" not in running.json()["detail"], running.text
        await cancel(api, "olga", session_id)
        reused = await mallory.post("/sessions", json=body)
        assert reused.status_code == 409, reused.text
        detail = reused.json()["detail"]
        assert session_id in detail and "\n" not in detail, detail
    async with api.as_("olga") as olga:
        audit = (await olga.get(f"/sessions/{session_id}/audit")).json()
    assert [event["event"] for event in audit][:1] == ["requested"] and audit[-1]["event"] == "cancelled", audit


async def test_a_proof_naming_another_chain_of_runs_is_refused_by_the_session(mailing_api: tuple[Api, Inbox]) -> None:
    """The session checks on its own: a proof the API's key signed for its current run, but naming
    a chain of runs that is not the session's, decides nothing (an Update straight to Temporal)."""
    from hitl.api.app import signing_key as key_of_the_api
    from workflows.decisions import parse_decision
    from workflows.proofs import sign_decision

    api, _ = mailing_api
    started = await api.start("olga", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    session_id, [item] = started["session_id"], started["pending"]
    handle = api.agent.client.get_workflow_handle(session_id)
    run_id = (await handle.describe()).run_id
    key_id, key = key_of_the_api()
    decision = {"call_id": item["call_id"], "by": "ana", "via": "email"}
    proof = sign_decision(key, key_id, session_id=session_id, call_id=item["call_id"], action="approve", by="ana",
                          args_sha256=item["args_sha256"], run_id=run_id, chain="a-chain-that-ended",
                          decision_sha256=parse_decision("approve", decision).digest())
    reason = await refused_update(handle, "approve_update", {**decision, "proof": proof})
    assert "another session under this id" in reason, reason
    assert (api.agent.workspace / "notes.txt").exists() and await tool_runs(api, session_id) == 0


async def test_a_slack_card_of_a_closed_session_decides_nothing_in_a_new_one_under_its_id(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given ana's Slack card for bob's session, when bob cancels it and starts a new session under
    the same id straight through Temporal, then her click on the old card (a request Slack signed)
    decides nothing and she is told why privately, nor does the edit form she opened from it; a
    click on the new card decides."""
    async with slack_world(env, workspace, tmp_path) as world:
        started = await world.api.start("bob", "please delete notes.txt", approvers={"delete_file": ["ana"]})
        session_id, [call] = started["session_id"], started["pending"]
        old_card = await world.card_for("ana")
        assert (await world.click("U0ANA", old_card, "edit")).status_code == 200
        [opened] = await eventually(lambda: asyncio.sleep(0, world.slack.answered("views.open")), bool)
        await cancel(world.api, "bob", session_id)

        again = await world.api.agent.start("please delete notes.txt", session_id=session_id, by="bob",
                                            verified_decisions=True, approvers={"delete_file": ["ana"]})
        [waiting] = await pending_items(again)
        assert (waiting["call_id"], waiting["args_sha256"]) == (call["call_id"], call["args_sha256"])
        new_card = await world.card_for("ana", count=2)

        assert (await world.click("U0ANA", old_card, "approve")).status_code == 200
        [note] = await eventually(lambda: asyncio.sleep(0, world.slack.answered("chat.postEphemeral")), bool)
        assert note.arguments["user"] == "U0ANA" and "earlier session" in note.arguments["text"], note.arguments
        submitted = await world.post(*signed(submit_edit("U0ANA", opened.arguments["view"], '{"path": "notes.txt"}')))
        assert "earlier session" in submitted.json()["errors"]["hitl_args"], submitted.text
        assert len(await pending_items(again)) == 1 and (workspace / "notes.txt").exists()
        assert await slack_tool_runs(world, session_id) == 0

        assert (await world.click("U0ANA", new_card, "approve")).status_code == 200
        await eventually(lambda: asyncio.sleep(0, (workspace / "notes.txt").exists()), lambda exists: not exists)
        assert await slack_tool_runs(world, session_id) == 1
