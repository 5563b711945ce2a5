"""A loopback endpoint that receives signed webhooks as a Standard Webhooks receiver does:
it verifies each with `standardwebhooks.Webhook(secret).verify(body, headers)` and refuses (401)
what does not verify."""

from __future__ import annotations

import base64
import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def new_webhook_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    verified: bool
    status: int

    @property
    def id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def notification(self) -> dict:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    deliveries: list[Delivery] = field(default_factory=list)

    def accepted(self) -> list[Delivery]:
        return [delivery for delivery in self.deliveries if delivery.status < 300]


@contextmanager
def webhook_receiver(secret: str, answers: tuple[int, ...] = ()) -> Iterator[Receiver]:
    """A receiver on a free loopback port. A verified delivery gets the next of `answers`
    (then 204); one that does not verify, 401."""
    verifier, planned = Webhook(secret), list(answers)
    lock = threading.Lock()
    receiver = Receiver("")

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["content-length"]))
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                verifier.verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
            with lock:
                status = (planned.pop(0) if planned else 204) if verified else 401
                receiver.deliveries.append(Delivery(headers, body, verified, status))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/hitl"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
