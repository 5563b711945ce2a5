"""A real SMTP server on a loopback port (aiosmtpd) that keeps what it receives, as an inbox.

`mail_server()` starts one; `mail_server(port, up=False)` only reserves its address, so a test
can start the worker while mail is down and `inbox.start()` it later.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any, Iterator

from aiosmtpd.controller import Controller

from hitl.devserver import free_port


@dataclass
class Inbox:
    port: int
    received: list[EmailMessage] = field(default_factory=list)
    controller: Controller | None = None
    refuse_once: set[str] = field(default_factory=set)  # addresses whose first mail gets "451 try later"
    refused: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def to(self, address: str) -> list[EmailMessage]:
        """The cards with decision links `address` received (the settled notes aside)."""
        return [mail for mail in self.cards() if mail["To"] == address]

    def cards(self) -> list[EmailMessage]:
        return [mail for mail in self.received if not mail["Subject"].startswith("Settled:")]

    def settled(self) -> list[EmailMessage]:
        """The short mails that say how a pause the recipient was mailed about ended."""
        return [mail for mail in self.received if mail["Subject"].startswith("Settled:")]

    def start(self) -> None:
        inbox = self

        class Keep:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                for address in envelope.rcpt_tos:
                    if address in inbox.refuse_once:
                        inbox.refuse_once.discard(address)
                        inbox.refused.append(address)
                        return "451 try again later"
                inbox.received.append(message_from_bytes(envelope.original_content, policy=policy.default))  # type: ignore[arg-type]
                return "250 OK"

        self.controller = Controller(Keep(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@contextmanager
def mail_server(up: bool = True) -> Iterator[Inbox]:
    inbox = Inbox(free_port())
    if up:
        inbox.start()
    try:
        yield inbox
    finally:
        inbox.stop()


def text_of(mail: EmailMessage) -> str:
    body = mail.get_body(("plain",))
    assert body is not None, mail
    return body.get_content().replace("\r\n", "\n")


def html_of(mail: EmailMessage) -> str:
    body = mail.get_body(("html",))
    assert body is not None, mail
    return body.get_content().replace("\r\n", "\n")


def links_in(mail: EmailMessage) -> dict[str, str]:
    """The choices the mail's text offers: {"Approve": url, "Reject": url, ...}."""
    return dict(re.findall(r"^(Approve|Reject|Answer: [^:]+): (\S+/decide/\S+)$", text_of(mail), re.M))
