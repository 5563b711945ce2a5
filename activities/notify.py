"""The notify activity: tell people a pause needs them.

By default a JSON line in HITL_WORKSPACE/notifications.jsonl (a tail -f away
from any chat bot); with HITL_NOTIFY_URL, an HTTP POST of the same JSON, unsigned.
Besides either, the webhooks of HITL_CHANNELS get it signed (activities/webhooks.py), and its
message channels (Slack) show it in a message each (activities/message_channels.py): the activity
returns those messages, and once the pause is settled the `settled` notification updates them. That
one goes to the message channels alone: the line, the POST and the webhooks heard of the pause, and
hear how it ended from the session's events.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from temporalio import activity
from temporalio.exceptions import ApplicationError

from datetime import datetime, timedelta, timezone

from activities.audience import operator_policy, stand_ins_of
from activities.message_channels import ChannelFailed, MessageChannel, Progress, each_channel
from activities.tools.errors import ToolError
from activities.tools.workspace import NOTIFICATIONS, Workspace
from activities.webhooks import DeliveryFailed, SignedWebhook, deliver_all, full_line, message_id
from workflows.contract import NOTIFY
from workflows.requests import Notification, NotifyReceipt


class NotifyActivities:
    def __init__(self, workspace: Path, webhook_url: str | None = None,
                 signed_webhooks: list[SignedWebhook] | None = None,
                 message_channels: list[MessageChannel] | None = None) -> None:
        self.workspace = workspace
        self.webhook_url = webhook_url
        self.signed_webhooks = signed_webhooks or []
        self.message_channels = message_channels or []

    @activity.defn(name=NOTIFY.name)
    async def notify(self, notification: Notification) -> NotifyReceipt:
        # What earlier attempts did (their heartbeats): a retry for one channel that failed sends
        # nothing again that another part already took. (Called outside an activity, by tests of
        # the line alone, it has no heartbeats.)
        within = activity.in_activity()
        progress = Progress.from_details(activity.info().heartbeat_details if within else ())

        def saved() -> None:
            if within:
                activity.heartbeat(progress.details())

        if notification.event == "settled":
            fail_if_any(await each_channel(self.message_channels, lambda channel: channel.settle(notification, progress, saved)))
            return NotifyReceipt()
        if within:  # the stand-ins of the people it is for see it too (activities/audience.py)
            notification = notification.model_copy(update={"stand_ins": await stand_ins_of(
                notification, operator_policy(), datetime.now(timezone.utc))})
        if not progress.plain_sent:
            await self._send_plain(full_line(notification).decode())
            progress.plain_sent = True
            saved()
        undelivered: list[DeliveryFailed] = []
        if self.signed_webhooks:
            info = activity.info()
            message = message_id(notification, info.workflow_run_id or "", info.activity_id)
            undelivered = await deliver_all(self.signed_webhooks, message, notification, info.attempt)
        fail_if_any([*undelivered, *await each_channel(self.message_channels,
                                                       lambda channel: channel.show(notification, progress, saved))])
        return NotifyReceipt(messages=list(progress.shown.values()))

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


def fail_if_any(failures: Sequence[ChannelFailed | DeliveryFailed]) -> None:
    """One failure for Temporal to retry with backoff (or after the wait a channel asked for);
    final only when sending again cannot help any of them."""
    if not failures:
        return
    waits = [failure.retry_after for failure in failures if isinstance(failure, ChannelFailed) and failure.retry_after]
    raise ApplicationError("; ".join(map(str, failures)), type="NotifyFailed",
                           non_retryable=all(failure.final for failure in failures),
                           next_retry_delay=timedelta(seconds=max(waits)) if waits else None)


def read_notifications(workspace: Path) -> list[dict]:
    path = workspace / NOTIFICATIONS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
