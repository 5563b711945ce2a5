"""Notifications POSTed to the webhooks of HITL_CHANNELS, signed as Standard Webhooks sign them.

What a receiver needs to act, by default: the session, the call, its tool and kind, the event,
its deadline, and where to read the card (`{public_url}/sessions/<id>/pending`, which answers
only the people who may see it). The arguments, the requester's message and the approvers go only
to a webhook the operator marked `full_card`: a receiver's logs and queues are not the session's.
Each carries `webhook-id`, `webhook-timestamp` and `webhook-signature` over the
notification JSON. The id is the same on every attempt at one notification, so a
receiver drops the duplicates Temporal's retries may bring; the timestamp is the
attempt's own, so a retry is never refused as stale.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Mapping
from urllib.parse import quote, urlsplit

from hitl.channels import Channels, ChannelsError
from hitl.extras import require
from workflows.requests import Notification

if TYPE_CHECKING:
    from standardwebhooks.webhooks import Webhook

log = logging.getLogger("hitl.webhooks")
TIMEOUT_SECONDS = 10
MINIMAL_ITEM = ("call_id", "tool", "kind", "deadline")
NOT_IN_ANY_LINE = {"settled", "messages", "owner", "participants"}  # for choosing who is shown, not for the line


class DeliveryFailed(Exception):
    """One endpoint did not take the notification; `final` when sending it again cannot help."""

    def __init__(self, line: str, final: bool) -> None:
        super().__init__(line)
        self.final = final


def shown_url(url: str) -> str:
    """The URL as a log may show it: no user, password or query (they may carry a token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def message_id(notification: Notification, run_id: str, sequence: str) -> str:
    """One id per notification, whatever the attempt: the session, the call, what happened, and
    which of the run's activities sent it (an escalation and a reminder of one call differ)."""
    parts = (notification.session_id, run_id, str(notification.item.get("call_id", "")), notification.event, sequence)
    return "msg_" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def full_line(notification: Notification) -> bytes:
    """The notification as the workspace's line says it: the whole card."""
    return notification.model_dump_json(exclude=NOT_IN_ANY_LINE).encode()


def minimal_line(notification: Notification, public_url: str | None) -> bytes:
    """What a receiver needs to act on the notification, and where the card is; nothing of what it asks."""
    item = {key: notification.item[key] for key in MINIMAL_ITEM if key in notification.item}
    card = {"card_url": f"{public_url.rstrip('/')}/sessions/{quote(notification.session_id, safe='')}/pending"} \
        if public_url else {}
    return json.dumps({"session_id": notification.session_id, "event": notification.event,
                       "at": notification.model_dump(mode="json")["at"], "item": item, **card}).encode()


@dataclass(frozen=True)
class SignedWebhook:
    url: str
    signer: Webhook
    full_card: bool = False
    public_url: str | None = None

    def body(self, notification: Notification) -> bytes:
        return full_line(notification) if self.full_card else minimal_line(notification, self.public_url)

    def deliver(self, message: str, body: bytes) -> None:
        now = datetime.now(timezone.utc)
        headers = {
            "content-type": "application/json",
            "webhook-id": message,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(message, now, body),
        }
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                response.read()
        except urllib.error.HTTPError as error:
            final = 400 <= error.code < 500 and error.code not in (408, 409, 425, 429)
            raise DeliveryFailed(f"webhook {shown_url(self.url)} answered {error.code}", final) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", None) or error
            raise DeliveryFailed(f"webhook {shown_url(self.url)} unreachable: {reason}", False) from None


def signed_webhooks(channels: Channels, environ: Mapping[str, str]) -> list[SignedWebhook]:
    """The channels' webhooks with their secrets, read from the environment now (never history)."""
    if not channels.webhooks:
        return []
    require("webhooks", "HITL_CHANNELS webhooks")
    from standardwebhooks.webhooks import EmptyWebhookSecretError, Webhook  # the `webhooks` extra

    hooks = []
    for index, hook in enumerate(channels.webhooks):
        try:
            signer = Webhook(environ[hook.secret_env])
        except (ValueError, EmptyWebhookSecretError) as error:
            raise ChannelsError(f"HITL_CHANNELS webhooks.{index}: {hook.secret_env} is not a Standard Webhooks secret "
                                f"(whsec_ and base64): {type(error).__name__}") from None
        hooks.append(SignedWebhook(hook.url, signer, hook.full_card, channels.public_url))
    return hooks


async def deliver_all(hooks: list[SignedWebhook], message: str, notification: Notification,
                      attempt: int) -> list[DeliveryFailed]:
    """Every webhook tried at once (a slow one must not use up the others' time), each sent what it
    is to be sent; each failure one line in the worker's log, and returned."""
    async def one(hook: SignedWebhook) -> DeliveryFailed | None:
        try:
            await asyncio.to_thread(hook.deliver, message, hook.body(notification))
        except DeliveryFailed as failure:
            log.warning("notify: %s (notification %s, attempt %d)%s", failure, message, attempt,
                        "" if failure.final else "; Temporal sends it again with backoff")
            return failure
        return None

    return [failure for failure in await asyncio.gather(*map(one, hooks)) if failure is not None]
