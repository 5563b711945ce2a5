"""The notify activity: tell people a pause needs them.

By default a JSON line in HITL_WORKSPACE/notifications.jsonl (a tail -f away
from any chat bot); with HITL_NOTIFY_URL, an HTTP POST of the same JSON, unsigned.
Besides either, the webhooks of HITL_CHANNELS get it signed (activities/webhooks.py)
and its people with an address get it by mail (activities/mail.py).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.mail import Mailer, mail_all
from activities.tools.errors import ToolError
from activities.tools.workspace import NOTIFICATIONS, Workspace
from activities.webhooks import SignedWebhook, deliver_all, message_id
from workflows.contract import NOTIFY
from workflows.requests import Notification

PLAIN_SENT = "plain notification sent"


class NotifyActivities:
    def __init__(self, workspace: Path, webhook_url: str | None = None,
                 signed_webhooks: list[SignedWebhook] | None = None, mail: Mailer | None = None) -> None:
        self.workspace = workspace
        self.webhook_url = webhook_url
        self.signed_webhooks = signed_webhooks or []
        self.mail = mail

    @activity.defn(name=NOTIFY.name)
    async def notify(self, notification: Notification) -> None:
        line = notification.model_dump_json()
        if not self.signed_webhooks and self.mail is None:
            await self._send_plain(line)
            return
        info = activity.info()
        # A retry for a webhook or a mail that failed: what an earlier attempt sent (the line or
        # unsigned POST, each person's mail) is not sent again: its heartbeat says what it was.
        sent = set(info.heartbeat_details or ())
        if PLAIN_SENT not in sent:
            await self._send_plain(line)
            sent.add(PLAIN_SENT)
            activity.heartbeat(*sorted(sent))
        failures: list[Exception] = []
        if self.mail is not None:
            failures += await mail_all(self.mail, notification, sent, lambda: activity.heartbeat(*sorted(sent)), info.attempt)
        if self.signed_webhooks:
            message = message_id(notification, info.workflow_run_id, info.activity_id)
            failures += await deliver_all(self.signed_webhooks, message, line.encode(), info.attempt)
        if failures:
            raise ApplicationError("; ".join(map(str, failures)), type="NotifyFailed" if self.mail else "WebhookFailed",
                                   non_retryable=all(getattr(failure, "final", False) for failure in failures))

    async def _send_plain(self, line: str) -> None:
        if self.webhook_url:
            await asyncio.to_thread(self._post, line.encode())
        else:
            await asyncio.to_thread(self._append, (line + "\n").encode())

    def _append(self, line: bytes) -> None:
        """One line appended to notifications.jsonl: 0600 (it carries arguments and
        email bodies), and never written through a link."""
        try:
            with Workspace(self.workspace) as workspace:
                workspace.append_private_file(NOTIFICATIONS, line)
        except ToolError as refusal:
            raise ApplicationError(str(refusal), type="NotifyRefused", non_retryable=True) from None

    def _post(self, body: bytes) -> None:
        request = urllib.request.Request(
            self.webhook_url or "", data=body, headers={"content-type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        except urllib.error.HTTPError as error:
            raise ApplicationError(
                f"webhook answered {error.code}", non_retryable=400 <= error.code < 500 and error.code not in (408, 429)
            ) from None


def read_notifications(workspace: Path) -> list[dict]:
    path = workspace / NOTIFICATIONS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
