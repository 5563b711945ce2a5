"""Pauses mailed to the people who may decide them (the `email` part of HITL_CHANNELS).

Each person a notification names (its `to`: the call's approvers, or whom an
escalation adds; @groups through the operator's policy; a call that names no
approvers goes to the person who asked) who has an address in `people` gets
one mail: the card (hitl/decision_card.py) as text and simple HTML, and one
link per choice to `{public_url}/decide/<token>` (hitl/email_links.py). Opening
a link decides nothing: the page it opens decides by POST. Once the pause is
settled anywhere, each person mailed about it gets a short mail saying how
("settled: approved by ana via slack").

It is a message channel (activities/message_channels.py): what an earlier
attempt at a notification mailed is in the activity's heartbeat and is not
mailed again; each person mailed is a reference the workflow hands back on
`settled`, signed here (an HMAC under the links' key over the session, the call
and the person), so a reference this worker did not make is never mailed to.

The SMTP login comes from the variables the file names, read when the worker
starts; like every channel secret, tool servers never inherit them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid
from functools import partial
from typing import Callable, Mapping
from urllib.parse import urlsplit

import aiosmtplib

from activities.audience import operator_policy, session_of, with_stand_ins
from activities.message_channels import ChannelFailed, MessageChannel, Progress, Saved
from hitl.channels import Channels
from hitl.access import expanded, may_read
from hitl.decision_card import card_html, card_text, title
from hitl.email_links import LinkClaims, choice_label, choices_of, make_link_token
from workflows.requests import MessageRef, Notification

log = logging.getLogger("hitl.mail")
NAME = "email"
TIMEOUT_SECONDS = 10
LINKS_LAST_DAYS = 7  # a pause without a deadline: its links still end (a reminder brings new ones)
SUBJECTS = {"requested": "Decision needed", "reminder": "Reminder: decision needed", "escalated": "Escalated: decision needed"}


class MailFailed(ChannelFailed):
    """A mail the server did not take; `final` when sending it again cannot help."""


@dataclass(frozen=True)
class SmtpServer:
    host: str
    port: int
    tls: bool  # smtps: TLS from the first byte; smtp: STARTTLS when the server offers it
    user: str | None = None
    password: str | None = None

    @classmethod
    def at(cls, url: str, user: str | None, password: str | None) -> SmtpServer:
        parts = urlsplit(url)
        tls = parts.scheme == "smtps"
        return cls(parts.hostname or "", parts.port or (465 if tls else 25), tls, user, password)

    @property
    def shown(self) -> str:
        return f"{'smtps' if self.tls else 'smtp'}://{self.host}:{self.port}"

    async def send(self, message: EmailMessage) -> None:
        try:
            await aiosmtplib.send(message, hostname=self.host, port=self.port, use_tls=self.tls,
                                  username=self.user, password=self.password, timeout=TIMEOUT_SECONDS)
        except aiosmtplib.SMTPRecipientsRefused as refused:
            codes = sorted({error.code for error in refused.recipients})
            raise MailFailed(f"mail server {self.shown} refused {message['To']} ({', '.join(map(str, codes))})",
                             all(500 <= code < 600 for code in codes)) from None
        except aiosmtplib.SMTPResponseException as error:
            raise MailFailed(f"mail server {self.shown} answered {error.code} {error.message}",
                             500 <= error.code < 600 and error.code != 530) from None
        except (aiosmtplib.SMTPException, OSError) as error:
            raise MailFailed(f"mail server {self.shown} unreachable: {error}", False) from None


@dataclass
class Mailer:
    """The email channel: `show` mails a waiting pause's card, `settle` how it ended."""

    server: SmtpServer
    sender: str
    public_url: str
    addresses: Mapping[str, str]  # person -> address
    link_key: bytes
    name: str = NAME

    async def show(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        if notification.event not in SUBJECTS:  # only a pause that waits gets a card with decision links
            return
        mails = {f"{self.name}:{notification.event}:{person}": (person, address)
                 for person, address in self.recipients(notification).items()}
        await self.each(notification, progress, saved, {
            key: (person, partial(self.compose, notification, person, address))
            for key, (person, address) in mails.items() if key not in progress.shown})

    async def settle(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        people = dict.fromkeys(self.person_of(notification, ref) for ref in notification.messages
                               if ref.channel == self.name and ref.ref not in progress.updated)
        await self.each(notification, progress, saved, {
            self.reference(notification, person).ref: (person, partial(self.ended, notification, person))
            for person in people if person is not None and person in self.addresses})

    async def each(self, notification: Notification, progress: Progress, saved: Saved,
                   mails: dict[str, tuple[str, Callable[[], EmailMessage]]]) -> None:
        """Each mail sent, one after the other, recorded at once in `progress` (under its key, or as
        updated when settling); every failure one line in the worker's log, then one ChannelFailed."""
        failures: list[MailFailed] = []
        for key, (person, compose) in mails.items():
            try:
                await self.server.send(compose())
            except MailFailed as failure:
                log.warning("notify: %s (%s mail to %s about %s)%s", failure, notification.event, person,
                            notification.item.get("call_id"), "" if failure.final else "; Temporal sends it again with backoff")
                failures.append(failure)
                continue
            if notification.event == "settled":
                progress.updated.append(key)
            else:
                progress.shown[key] = self.reference(notification, person)
            saved()
        if failures:
            raise MailFailed("; ".join(map(str, failures)), all(failure.final for failure in failures))

    def signature(self, notification: Notification, person: str) -> str:
        about = "\x1f".join((NAME, notification.session_id, str(notification.item.get("call_id", "")), person))
        return base64.urlsafe_b64encode(hmac.new(self.link_key, about.encode(), hashlib.sha256).digest()[:18]).decode()

    def reference(self, notification: Notification, person: str) -> MessageRef:
        return MessageRef(channel=self.name, ref=f"{person}/{self.signature(notification, person)}")

    def person_of(self, notification: Notification, ref: MessageRef) -> str | None:
        """The person of a reference this worker made for this session and call, else None."""
        person, _, signature = ref.ref.rpartition("/")
        if hmac.compare_digest(signature.encode(), self.signature(notification, person).encode()):
            return person
        log.warning("notify: a mail reference for %s %s is not this worker's; nobody mailed",
                    notification.session_id, notification.item.get("call_id"))
        return None

    def ended(self, notification: Notification, person: str) -> EmailMessage:
        """The short mail once the pause is settled: how, by whom, through which door."""
        how, item = notification.settled, notification.item
        said = (f"{how.outcome}" + (f" by {how.by}" if how.by else "") + (f" via {how.via}" if how.via else "")
                if how else "settled")
        message = self.envelope(self.addresses[person], f"Settled: {item.get('tool', 'a call')}: {said}")
        message.set_content(f"settled: {said}\n\n{title(item)}: this is decided; the links of the earlier mail "
                            "decide nothing now.\n")
        return message

    def envelope(self, address: str, subject: str) -> EmailMessage:
        message = EmailMessage()
        message["Subject"], message["From"], message["To"] = subject, self.sender, address
        message["Message-ID"] = make_msgid(domain=self.sender.rpartition("@")[2])
        return message

    def recipients(self, notification: Notification) -> dict[str, str]:
        """The people named (or whoever asked), those of them who may see the session (activities/audience.py)."""
        named = notification.to or [notification.item.get("requested_by") or ""]
        policy = operator_policy()
        session = session_of(notification)
        people = sorted(expanded(named, policy))
        readers = [person for person in people if may_read(person, session, policy)]
        return {person: self.addresses[person] for person in with_stand_ins(notification, readers)
                if person in self.addresses}

    def links(self, notification: Notification, person: str, mail: str) -> list[tuple[str, str]]:
        """(label, URL) per choice, each a token for this person's one decision from this mail, in
        the session's chain of runs (none when the notification does not name it: the inbox decides)."""
        item = notification.item
        if notification.chain is None:
            return []
        deadline = item.get("deadline")
        expires = (datetime.fromisoformat(deadline.replace("Z", "+00:00")) if deadline
                   else notification.at + timedelta(days=LINKS_LAST_DAYS))
        base = self.public_url.rstrip("/") + "/decide/"
        return [(choice_label(verb, answer), base + make_link_token(self.link_key, LinkClaims(
            person=person, session_id=notification.session_id, call_id=item["call_id"],
            args_sha256=item["args_sha256"], verb=verb, answer=answer, expires=int(expires.timestamp()), mail=mail,
            chain=notification.chain,
        ))) for verb, answer in choices_of(item)]

    def compose(self, notification: Notification, person: str, address: str) -> EmailMessage:
        item = notification.item
        links = self.links(notification, person, secrets.token_urlsafe(12))
        inbox = self.public_url.rstrip("/") + "/"
        message = self.envelope(address, f"{SUBJECTS.get(notification.event, 'Decision needed')}: {title(item)}")
        message["X-Hitl-Session"], message["X-Hitl-Call"] = notification.session_id, item["call_id"]
        choices = "\n".join(f"{label}: {url}" for label, url in links) or f"Answer in the inbox: {inbox}"
        message.set_content(f"{title(item)}\n\n{card_text(item)}\n\n{choices}\n\n"
                            "Opening a link decides nothing: the page it opens shows the call and a button that decides.\n")
        buttons = "".join(f'<p><a href="{html.escape(url)}">{html.escape(label)}</a></p>' for label, url in links) \
            or f'<p><a href="{html.escape(inbox)}">Answer in the inbox</a></p>'
        message.add_alternative(f"<html><body><h2>{html.escape(title(item))}</h2>{card_html(item)}{buttons}"
                                "<p>Opening a link decides nothing: the page it opens shows the call and a button "
                                "that decides.</p></body></html>", subtype="html")
        return message


def mail_messages(channels: Channels, environ: Mapping[str, str], link_key: Callable[[], bytes]) -> list[MessageChannel]:
    """The mail channel of HITL_CHANNELS as the worker's message channels: none without `email`."""
    mail = mailer(channels, environ, link_key)
    return [mail] if mail is not None else []


def mailer(channels: Channels, environ: Mapping[str, str], link_key: Callable[[], bytes]) -> Mailer | None:
    """The channels' mail, with its login read from the environment now; None without `email`."""
    email = channels.email
    if email is None or channels.public_url is None:
        return None
    user = environ.get(email.user_env) if email.user_env else None
    password = environ.get(email.password_env) if email.password_env else None
    addresses = {person: about.email for person, about in channels.people.items() if about.email}
    return Mailer(SmtpServer.at(email.smtp_url, user, password), email.sender, channels.public_url, addresses, link_key())
