"""The notify activity: tell people a pause needs them.

By default a JSON line in HITL_WORKSPACE/notifications.jsonl (a tail -f away
from any chat bot); with HITL_NOTIFY_URL, an HTTP POST of the same JSON.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.tools.errors import ToolError
from activities.tools.workspace import NOTIFICATIONS, Workspace
from workflows.contract import NOTIFY
from workflows.requests import Notification


class NotifyActivities:
    def __init__(self, workspace: Path, webhook_url: str | None = None) -> None:
        self.workspace = workspace
        self.webhook_url = webhook_url

    @activity.defn(name=NOTIFY.name)
    async def notify(self, notification: Notification) -> None:
        line = notification.model_dump_json()
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
