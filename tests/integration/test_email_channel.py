"""A pause reaches the people who may decide it by mail (the `email` part of HITL_CHANNELS), through
a real SMTP server on loopback: the card they need and one link per choice; a retry never mails
anyone twice; a mail server that is down is one line in the worker's log and mailed later."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.mail import Mailer, mailer
from activities.offline_model import OfflineModel
from hitl.channels import channels_from_env
from hitl.decision_card import deadline_shown
from hitl.email_links import link_key_from_seed, read_link_token
from hitl.worker import build_worker
from tests.support.mail_server import Inbox, html_of, links_in, mail_server, text_of
from tests.support.sessions import Agent, eventually, pending_items

PEOPLE = {"ana": {"email": "ana@example.com"}, "bob": {"email": "bob@example.com"}, "carol": {}}
LINK_KEY = link_key_from_seed(os.urandom(32))


def mail_to(folder: Path, inbox: Inbox, public_url: str = "https://hitl.example.com") -> Mailer:
    """The worker's mail, read as it reads it at start: HITL_CHANNELS with the mail server and people."""
    path = folder / "channels.json"
    path.write_text(json.dumps({"public_url": public_url, "people": PEOPLE,
                                "email": {"smtp_url": inbox.url, "from": "agent@example.com"}}))
    environ = {"HITL_CHANNELS": str(path)}
    mail = mailer(channels_from_env(environ), environ, lambda: LINK_KEY)
    assert mail is not None
    return mail


async def received(inbox: Inbox, count: int) -> list:
    return await eventually(lambda: asyncio.sleep(0, inbox.cards()), lambda seen: len(seen) >= count)


async def settled_mails(inbox: Inbox, count: int) -> list:
    return await eventually(lambda: asyncio.sleep(0, inbox.settled()), lambda seen: len(seen) >= count)


APPROVERS = {"approvers": {"delete_file": ["ana", "carol"]}}


async def test_the_approver_gets_the_card_and_one_link_per_choice(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """Given ana and carol approve delete_file and only ana has an address, when a session pauses on
    it, then ana gets one mail with who asked, the message, the tool, its arguments, why, the
    deadline, and an approve and a reject link, each bound to her, the call and its arguments."""
    with mail_server() as inbox:
        async with build_worker(env.client, "mail-card", OfflineModel(), workspace, message_channels=[mail_to(tmp_path, inbox)]):
            session = await Agent(env.client, "mail-card", workspace).start("please delete notes.txt", by="dave", **APPROVERS)
            [item] = await pending_items(session)
            [mail] = await received(inbox, 1)
            await session.signal("cancel", {})
            await session.result()
    assert mail["To"] == "ana@example.com" and mail["From"] == "agent@example.com"
    assert mail["Subject"] == "Decision needed: dave needs you to approve delete_file"
    text = text_of(mail)
    for line in ("Asked by: dave", "Their message: please delete notes.txt", "Tool: delete_file",
                 f"Why a person: {item['because']}", f"Deadline: {deadline_shown(item['deadline'])}", '"path": "notes.txt"'):
        assert line in text, (line, text)
    assert "notes.txt" in html_of(mail) and "<script" not in html_of(mail)
    links = links_in(mail)
    assert sorted(links) == ["Approve", "Reject"]
    for choice, url in links.items():
        assert url.startswith("https://hitl.example.com/decide/")
        claims = read_link_token(LINK_KEY, url.rsplit("/", 1)[1], now=0)
        assert (claims.person, claims.session_id, claims.call_id, claims.args_sha256, claims.verb) == \
            ("ana", session.id, item["call_id"], item["args_sha256"], choice.lower())
    assert len({read_link_token(LINK_KEY, url.rsplit("/", 1)[1], now=0).mail for url in links.values()}) == 1


async def test_a_retry_mails_only_whom_the_first_attempt_did_not_reach(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Given two approvers with addresses and a mail server that defers bob's first mail, when a
    session pauses, then the worker says so in one line, Temporal retries the notification, and
    each of them has exactly one mail: ana's is not sent again. Once the session is cancelled,
    each of them gets one short mail saying so."""
    with mail_server() as inbox:
        inbox.refuse_once.add("bob@example.com")
        async with build_worker(env.client, "mail-retry", OfflineModel(), workspace, message_channels=[mail_to(tmp_path, inbox)]):
            session = await Agent(env.client, "mail-retry", workspace).start(
                "please delete notes.txt", approvers={"delete_file": ["ana", "bob"]})
            await pending_items(session)
            await received(inbox, 2)
            await session.signal("cancel", {})
            await session.result()
            ended = await settled_mails(inbox, 2)
    assert inbox.refused == ["bob@example.com"]
    assert sorted(mail["To"] for mail in inbox.cards()) == ["ana@example.com", "bob@example.com"]
    assert sorted(mail["To"] for mail in ended) == ["ana@example.com", "bob@example.com"]
    assert all(text_of(mail).startswith("settled: cancelled\n") for mail in ended), [text_of(m) for m in ended]
    [line] = [record.getMessage() for record in caplog.records if record.name == "hitl.mail"]
    assert f"mail server {inbox.url} answered 451" in line and "bob" in line and "sends it again" in line, line


async def test_with_the_mail_server_down_the_worker_says_so_once_and_mails_when_it_is_back(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Given a mail server that is not listening, when a session pauses, then the worker logs one
    line naming the server and that it will retry; once the server is up, ana gets her mail once."""
    with mail_server(up=False) as inbox:
        async with build_worker(env.client, "mail-down", OfflineModel(), workspace, message_channels=[mail_to(tmp_path, inbox)]):
            session = await Agent(env.client, "mail-down", workspace).start("please delete notes.txt", **APPROVERS)
            await pending_items(session)
            await eventually(lambda: asyncio.sleep(0, [r for r in caplog.records if r.name == "hitl.mail"]), bool)
            inbox.start()
            [mail] = await received(inbox, 1)
            await session.signal("cancel", {})
            await session.result()
    assert mail["To"] == "ana@example.com"
    lines = [record.getMessage() for record in caplog.records if record.name == "hitl.mail"]
    assert lines and all("\n" not in line and not record.exc_info
                         for line, record in zip(lines, caplog.records)), lines
    assert f"mail server {inbox.url} unreachable" in lines[0] and "sends it again" in lines[0], lines[0]


async def test_a_settled_notice_mails_only_whom_this_worker_mailed(tmp_path: Path) -> None:
    """The references a settled notice hands back come from an activity result anyone who reaches
    the frontend may complete: one this worker signed for that call mails its person once; one made
    up, or signed for another call, mails nobody."""
    from datetime import datetime, timezone

    from activities.message_channels import Progress
    from workflows.requests import MessageRef, Notification, SettledNotice

    with mail_server() as inbox:
        mail = mail_to(tmp_path, inbox)
        item = {"call_id": "call_1", "tool": "delete_file", "args": {}, "args_sha256": "x"}
        shown = Notification(session_id="s-1", event="requested", item=item, to=["ana"], at=datetime.now(timezone.utc))
        other_call = shown.model_copy(update={"item": {**item, "call_id": "call_2"}})
        settled = shown.model_copy(update={
            "event": "settled", "settled": SettledNotice(outcome="approved", by="bob", via="slack"),
            "messages": [mail.reference(shown, "ana"), mail.reference(shown, "ana"),
                         MessageRef(channel="email", ref="bob/made-up"), mail.reference(other_call, "bob")]})
        await mail.settle(settled, Progress(), lambda: None)
    [note] = inbox.received
    assert note["To"] == "ana@example.com" and note["Subject"] == "Settled: delete_file: approved by bob via slack"
    assert text_of(note).startswith("settled: approved by bob via slack\n")
