"""Slack as a message channel: a card per pause for the people who may decide it, updated once settled.

Each pause is a card in the Slack of the people who may decide it, and the card is updated once
the pause is settled (docs/interface.md, "Decision channels").

It speaks the Web API through slack_sdk's WebClient at the channels file's `api_url`, with the bot
token from the variable the file names (read when the worker starts; never in history). A pause
reaches each person who may decide it and may see its session (activities/audience.py) that
`people` maps to a Slack user, by direct message. A pause that the session's own people decide goes
instead to the file's `channel` only where the operator said everyone who reads it may see every
session (`channel_may_see_every_session`): a channel's members are not the session's people.

The messages it posted go back to the workflow as references it signs (channel, ts and an HMAC
over them with the session and call, under the app's signing secret): the workflow hands them
back, untrusted, on `settled`, and a reference this worker did not make for that call is never
acted on. A Slack answer that fails is one line in the worker's log and a retry by Temporal (after
the wait Slack asks for on 429); what an earlier attempt posted is in its heartbeat, never posted again.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Any, Mapping

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from activities.audience import deciders_who_may_see, names_the_session_people, operator_policy
from activities.message_channels import ChannelFailed, MessageChannel, Progress, Saved
from activities.slack_card import card, ended
from hitl.channels import Channels
from workflows.requests import MessageRef, Notification

log = logging.getLogger("hitl.slack")
NAME = "slack"
TIMEOUT_SECONDS = 10
# Slack errors no retry will mend: a wrong token, a channel the bot is not in, a message gone.
FINAL_ERRORS = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "channel_not_found",
                "not_in_channel", "message_not_found", "cant_update_message", "missing_scope", "invalid_blocks"}


def slack_client(channels: Channels, environ: Mapping[str, str]) -> WebClient:
    assert channels.slack is not None
    return WebClient(token=environ[channels.slack.bot_token_env], base_url=channels.slack.api_url,
                     timeout=TIMEOUT_SECONDS)


@dataclass
class SlackMessages:
    name: str
    client: WebClient
    signing_secret: str
    people: dict[str, str]  # person -> Slack user id
    shared_channel: str | None  # shown the pauses of the session's own people, when opted in

    async def show(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        text, blocks = card(notification)
        for key, target in self.recipients(notification):
            if key in progress.shown:
                continue
            answer = await self.call("chat.postMessage", notification, channel=target, text=text, blocks=blocks)
            progress.shown[key] = self.reference(notification, answer["channel"], answer["ts"])
            saved()

    async def settle(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        text, blocks = ended(notification)
        for ref in notification.messages:
            if ref.channel != self.name or ref.ref in progress.updated:
                continue
            where = self.place(notification, ref)
            if where is None:
                log.warning("slack: a message reference for %s %s is not this worker's; not updated",
                            notification.session_id, notification.item.get("call_id"))
                continue
            await self.call("chat.update", notification, channel=where[0], ts=where[1], text=text, blocks=blocks)
            progress.updated.append(ref.ref)
            saved()

    def recipients(self, notification: Notification) -> list[tuple[str, str]]:
        """(progress key, where to post): the opted-in channel, or each person who may see and decide it."""
        if self.shared_channel and names_the_session_people(notification):
            return [(f"{self.name}:{notification.event}:#{self.shared_channel}", self.shared_channel)]
        return [(f"{self.name}:{notification.event}:{person}", self.people[person])
                for person in deciders_who_may_see(notification, operator_policy()) if person in self.people]

    def signature(self, notification: Notification, channel: str, ts: str) -> str:
        about = "\x1f".join((notification.session_id, str(notification.item.get("call_id", "")), channel, ts))
        digest = hmac.new(self.signing_secret.encode(), about.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:18]).decode()

    def reference(self, notification: Notification, channel: str, ts: str) -> MessageRef:
        return MessageRef(channel=self.name, ref=f"{channel}/{ts}/{self.signature(notification, channel, ts)}")

    def place(self, notification: Notification, ref: MessageRef) -> tuple[str, str] | None:
        """(channel, ts) of a reference this worker signed for this session and call, else None."""
        parts = ref.ref.split("/")
        if len(parts) != 3 or not hmac.compare_digest(parts[2], self.signature(notification, parts[0], parts[1])):
            return None
        return parts[0], parts[1]

    async def call(self, method: str, notification: Notification, **arguments: Any) -> Any:
        about = f"{notification.event} of {notification.session_id} {notification.item.get('call_id', '')}"
        try:
            return (await asyncio.to_thread(self.client.api_call, method, json=arguments)).data
        except SlackApiError as error:
            status, code = error.response.status_code, error.response.get("error", "?")
            wait = float(error.response.headers.get("Retry-After", 0) or 0) if status == 429 else None
            final = code in FINAL_ERRORS
            line = f"slack {method} answered {status} ({code}) for {about}"
        except (SlackClientError, OSError) as error:
            wait, final, line = None, False, f"slack {method} unreachable ({type(error).__name__}: {error}) for {about}"
        log.warning("notify: %s%s", line, "" if final else
                    f"; Temporal sends it again {f'in {wait:g}s, as Slack asked' if wait else 'with backoff'}")
        raise ChannelFailed(line, final, wait or None)


def slack_messages(channels: Channels, environ: Mapping[str, str]) -> list[MessageChannel]:
    """The Slack channel of HITL_CHANNELS, with its secrets from the environment; none without one."""
    if channels.slack is None:
        return []
    people = {person: where.slack for person, where in channels.people.items() if where.slack}
    return [SlackMessages(NAME, slack_client(channels, environ), environ[channels.slack.signing_secret_env],
                          people, channels.slack.shared_channel)]
