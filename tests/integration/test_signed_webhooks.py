"""People's own endpoints hear of pauses through the signed webhooks of HITL_CHANNELS, and can
tell a notification the worker sent from one anybody else made up."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.notify import read_notifications
from activities.offline_model import OfflineModel
from activities.webhooks import DeliveryFailed, SignedWebhook, signed_webhooks
from hitl.channels import channels_from_env
from hitl.worker import build_worker
from tests.support.sessions import Agent, eventually, pending_items
from hitl.devserver import free_port
from tests.support.stack import ROOT, product_env
from tests.support.webhook_receiver import Delivery, Receiver, new_webhook_secret, webhook_receiver


def channels_file(folder: Path, url: str, **hook: object) -> Path:
    path = folder / "channels.json"
    path.write_text(json.dumps({"public_url": "https://hitl.example.com",
                                "webhooks": [{"url": url, "secret_env": "HITL_WEBHOOK_SECRET", **hook}]}))
    return path


def webhooks_to(folder: Path, url: str, secret: str, **hook: object) -> list[SignedWebhook]:
    """The worker's webhooks, read as it reads them at start: HITL_CHANNELS and the secret it names."""
    environ = {"HITL_CHANNELS": str(channels_file(folder, url, **hook)), "HITL_WEBHOOK_SECRET": secret}
    return signed_webhooks(channels_from_env(environ), environ)


async def deliveries(receiver: Receiver, count: int) -> list[Delivery]:
    return await eventually(lambda: asyncio.sleep(0, list(receiver.deliveries)), lambda seen: len(seen) >= count)


async def notify_failures(session: WorkflowHandle) -> list[int]:
    """The attempt at which each notify activity of the session failed for good."""
    history = await session.fetch_history()
    notify = {event.event_id for event in history.events if event.HasField("activity_task_scheduled_event_attributes")
              and event.activity_task_scheduled_event_attributes.activity_type.name == "notify"}
    started = {event.event_id: event.activity_task_started_event_attributes.attempt for event in history.events
               if event.HasField("activity_task_started_event_attributes")
               and event.activity_task_started_event_attributes.scheduled_event_id in notify}
    return [started[event.activity_task_failed_event_attributes.started_event_id] for event in history.events
            if event.HasField("activity_task_failed_event_attributes")
            and event.activity_task_failed_event_attributes.scheduled_event_id in notify]


async def test_a_pause_reaches_a_signed_webhook_that_verifies_it(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """Given a webhook in HITL_CHANNELS, when a session pauses for approval, then the endpoint
    gets the notification once, and it verifies with the endpoint's secret. It says what a
    receiver needs to act (the session, the call, the tool, where the card is) and nothing the
    session's people alone may read: no arguments, no message, no approvers."""
    secret = new_webhook_secret()
    with webhook_receiver(secret) as receiver:
        async with build_worker(env.client, "signed-hooks", OfflineModel(), workspace,
                                webhooks=webhooks_to(tmp_path, receiver.url, secret)):
            session = await Agent(env.client, "signed-hooks", workspace).start(
                "please delete notes.txt", approvers={"delete_file": ["ana"]})
            [item] = await pending_items(session)
            await deliveries(receiver, 1)
            await session.signal("cancel", {})
            await session.result()
    [delivery] = receiver.deliveries
    assert delivery.verified and delivery.status == 204
    assert delivery.notification == {
        "session_id": session.id, "event": "requested", "at": delivery.notification["at"],
        "item": {"call_id": item["call_id"], "tool": "delete_file", "kind": "approval", "deadline": item["deadline"]},
        "card_url": f"https://hitl.example.com/sessions/{session.id}/pending"}
    for secretive in ("notes.txt", "please delete", "ana"):
        assert secretive not in delivery.body.decode(), secretive
    assert delivery.id.startswith("msg_")
    # The workspace's own line is still written, the whole card.
    [line] = read_notifications(workspace)
    assert line["item"]["args"] == {"path": "notes.txt"} and line["to"] == ["ana"]


async def test_a_webhook_the_operator_marked_full_card_gets_the_whole_card(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """Given a webhook with `full_card: true`, when a session pauses, then it gets the
    notification the workspace's line holds: arguments, message and approvers with it."""
    secret = new_webhook_secret()
    with webhook_receiver(secret) as receiver:
        async with build_worker(env.client, "full-card-hooks", OfflineModel(), workspace,
                                webhooks=webhooks_to(tmp_path, receiver.url, secret, full_card=True)):
            session = await Agent(env.client, "full-card-hooks", workspace).start(
                "please delete notes.txt", approvers={"delete_file": ["ana"]})
            await pending_items(session)
            await deliveries(receiver, 1)
            await session.signal("cancel", {})
            await session.result()
    [delivery] = receiver.deliveries
    assert delivery.verified and read_notifications(workspace) == [delivery.notification]
    assert delivery.notification["item"]["args"] == {"path": "notes.txt"} and delivery.notification["to"] == ["ana"]


async def test_a_failing_endpoint_gets_the_same_notification_again_until_it_takes_it(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """Given an endpoint that answers 500 twice, then 200, when a session pauses, then it is sent
    the notification three times under one webhook-id, each signed afresh, and takes it once;
    the workspace's line is written once, not once per attempt."""
    secret = new_webhook_secret()
    with webhook_receiver(secret, answers=(500, 500, 200)) as receiver:
        async with build_worker(env.client, "flaky-hooks", OfflineModel(), workspace,
                                webhooks=webhooks_to(tmp_path, receiver.url, secret)):
            session = await Agent(env.client, "flaky-hooks", workspace).start("please delete notes.txt")
            await pending_items(session)
            await deliveries(receiver, 3)
            await session.signal("cancel", {})
            await session.result()
    assert [delivery.status for delivery in receiver.deliveries] == [500, 500, 200]
    assert all(delivery.verified for delivery in receiver.deliveries)
    assert len({delivery.id for delivery in receiver.deliveries}) == 1
    assert len(receiver.accepted()) == 1
    assert len(read_notifications(workspace)) == 1
    assert await notify_failures(session) == []


async def test_an_endpoint_with_another_secret_refuses_it_and_the_worker_says_so_in_one_line(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Given a worker whose secret is not the endpoint's, when a session pauses, then the endpoint
    refuses the notification (it does not verify), the worker logs one line with the status and
    the URL without its query, and does not send it again: a 401 will not change."""
    with webhook_receiver(new_webhook_secret()) as receiver:
        url = receiver.url + "?token=not-for-logs"
        async with build_worker(env.client, "wrong-secret", OfflineModel(), workspace,
                                webhooks=webhooks_to(tmp_path, url, new_webhook_secret())):
            session = await Agent(env.client, "wrong-secret", workspace).start("please delete notes.txt")
            await pending_items(session)
            assert await eventually(lambda: notify_failures(session), bool) == [1]
            await session.signal("cancel", {})
            await session.result()
    [delivery] = receiver.deliveries
    assert not delivery.verified and delivery.status == 401
    [line] = [record.getMessage() for record in caplog.records if record.name == "hitl.webhooks"]
    assert f"webhook {receiver.url} answered 401" in line and "not-for-logs" not in line, line
    assert "\n" not in line and not any(record.exc_info for record in caplog.records if record.name == "hitl.webhooks")


def test_a_notification_whose_timestamp_or_signature_was_changed_is_refused(tmp_path: Path) -> None:
    """Given a notification the worker signed, when its timestamp, signature or body is changed
    on the way, then the receiver's verifier refuses it; as sent, it verifies."""
    secret = new_webhook_secret()
    with webhook_receiver(secret) as receiver:
        [hook] = webhooks_to(tmp_path, receiver.url, secret)
        hook.deliver("msg_example", b'{"event": "requested"}')
        [sent] = receiver.deliveries
        timestamp = int(sent.headers["webhook-timestamp"])
        _, signature = sent.headers["webhook-signature"].split(",", 1)
        forged = signature[:-2] + ("A=" if signature[-2:] != "A=" else "B=")
        variants = {
            "as sent": (sent.headers, sent.body),
            "timestamp moved": ({**sent.headers, "webhook-timestamp": str(timestamp + 1)}, sent.body),
            "an hour old": ({**sent.headers, "webhook-timestamp": str(timestamp - 3600)}, sent.body),
            "signature changed": ({**sent.headers, "webhook-signature": f"v1,{forged}"}, sent.body),
            "another id": ({**sent.headers, "webhook-id": "msg_other"}, sent.body),
            "body changed": (sent.headers, b'{"event": "approved"}'),
        }
        answers = {what: post(receiver.url, body, headers) for what, (headers, body) in variants.items()}
    assert answers == {"as sent": 204, "timestamp moved": 401, "an hour old": 401, "signature changed": 401,
                       "another id": 401, "body changed": 401}


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={name: value for name, value in headers.items() if name != "content-length"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.parametrize("problem", ["secret not set", "file missing", "not a secret"])
def test_a_worker_with_unusable_channels_refuses_to_start_with_one_line(tmp_path: Path, problem: str) -> None:
    path = channels_file(tmp_path, "https://example.com/hooks/hitl")
    variables = {"HITL_CHANNELS": str(path)}
    if problem == "file missing":
        variables["HITL_CHANNELS"] = str(tmp_path / "absent.json")
        variables["HITL_WEBHOOK_SECRET"] = new_webhook_secret()
    if problem == "not a secret":
        variables["HITL_WEBHOOK_SECRET"] = "whsec_"
    completed = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=product_env(**variables),
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0
    assert "Traceback" not in completed.stderr, completed.stderr
    [line] = [line for line in completed.stderr.splitlines() if line.strip()]
    assert line.startswith(f"worker: HITL_CHANNELS={variables['HITL_CHANNELS']}") or "HITL_WEBHOOK_SECRET" in line, line
    reason = {"secret not set": "not set in the environment: HITL_WEBHOOK_SECRET", "file missing": "cannot read it",
              "not a secret": "not a Standard Webhooks secret"}[problem]
    assert reason in line, line


async def test_the_documented_receiver_runs_as_printed_and_takes_each_notification_once(tmp_path: Path) -> None:
    """Given docs/interface.md's receiver.py, run as printed, when the worker's signer sends it a
    notification twice under one id and a forger sends one with another secret, then it prints
    the notification once and refuses the forgery."""
    example = re.search(r"```python\n(# receiver\.py.*?)```", (ROOT / "docs" / "interface.md").read_text(), re.S)
    assert example, "docs/interface.md's receiver.py"
    (tmp_path / "receiver.py").write_text(example.group(1))
    secret, port = new_webhook_secret(), free_port()
    url = f"http://127.0.0.1:{port}/hooks/hitl"
    [hook] = webhooks_to(tmp_path, url, secret)
    [forger] = webhooks_to(tmp_path, url, new_webhook_secret())
    body = json.dumps({"session_id": "s1", "event": "requested", "item": {"call_id": "c1", "tool": "delete_file"},
                       "to": ["ana"], "at": "2026-01-01T00:00:00Z"}).encode()
    log = tmp_path / "receiver.log"
    process = subprocess.Popen([sys.executable, "receiver.py"], cwd=tmp_path, stdout=log.open("wb"),
                               stderr=(tmp_path / "access.log").open("wb"), env=product_env(HITL_WEBHOOK_SECRET=secret, PORT=str(port)))
    try:
        await eventually(lambda: asyncio.to_thread(taken, hook, "msg_1", body), bool)
        hook.deliver("msg_1", body)
        with pytest.raises(DeliveryFailed, match="answered 401"):
            forger.deliver("msg_2", body)
    finally:
        process.terminate()
        process.wait()
    assert log.read_text().splitlines() == ["requested: s1 c1 delete_file"], log.read_text()


def taken(hook: SignedWebhook, message: str, body: bytes) -> bool:
    """Whether the endpoint took the notification (False while nothing listens there yet)."""
    try:
        hook.deliver(message, body)
    except DeliveryFailed as failure:
        assert "unreachable" in str(failure), failure
        return False
    return True
