"""Slack on loopback: a server speaking the Web API methods this product calls (chat.postMessage,
chat.update, views.open, chat.postEphemeral) that records each call, and interaction requests
signed exactly as Slack signs them (docs.slack.dev, "Verifying requests from Slack")."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import urlencode

BOT_TOKEN = "xoxb-test-bot-token-0123456789"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
FAILURES = {429: {"ok": False, "error": "ratelimited"}, 500: None}  # a 500 as a proxy sends it: not JSON


@dataclass
class SlackCall:
    method: str
    arguments: dict[str, Any]
    token: str
    status: int
    answer: dict[str, Any] | None = None


@dataclass
class SlackApi:
    """What the loopback Slack was asked; `fail_next[method]` answers the next calls with those statuses."""

    base_url: str = ""
    calls: list[SlackCall] = field(default_factory=list)
    fail_next: dict[str, deque[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stamps: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def answered(self, method: str, status: int = 200) -> list[SlackCall]:
        return [call for call in self.calls if call.method == method and call.status == status]

    def answer(self, method: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if method == "chat.postMessage":
            channel = arguments["channel"]  # a user id opens a direct message, as Slack does
            return {"ok": True, "channel": "D" + channel[1:] if channel.startswith("U") else channel,
                    "ts": f"1700000000.{next(self.stamps):06d}", "message": {"text": arguments.get("text")}}
        if method == "chat.update":
            return {"ok": True, "channel": arguments["channel"], "ts": arguments["ts"]}
        if method == "views.open":
            return {"ok": True, "view": {"id": f"V{next(self.stamps)}"}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"1700000000.{next(self.stamps):06d}"}
        return {"ok": False, "error": "unknown_method"}


@contextmanager
def slack_api() -> Iterator[SlackApi]:
    api = SlackApi()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            method = self.path.rsplit("/", 1)[-1]
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            arguments = json.loads(body) if body else {}
            with api.lock:
                queued = api.fail_next.get(method)
                status = queued.popleft() if queued else 200
                answer = api.answer(method, arguments) if status == 200 else FAILURES.get(status)
                api.calls.append(SlackCall(method, arguments, self.headers.get("authorization", ""), status, answer))
            data = json.dumps(answer).encode() if answer is not None else b"<html>upstream error</html>"
            self.send_response(status)
            self.send_header("content-type", "application/json" if answer is not None else "text/html")
            if status == 429:
                self.send_header("Retry-After", "1")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.base_url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def signed(payload: dict[str, Any], secret: str = SIGNING_SECRET, at: float | None = None) -> tuple[bytes, dict[str, str]]:
    """An interaction request as Slack sends one: `payload=<json>` form-encoded, signed v0 over
    `v0:{timestamp}:{body}` with the app's signing secret."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    timestamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
    return body, {"content-type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": timestamp,
                  "X-Slack-Signature": f"v0={digest}"}


def click(user: str, message: dict[str, Any], action_id: str) -> dict[str, Any]:
    """The block_actions payload of `user` clicking the button `action_id` on a posted message."""
    [buttons] = [block for block in message["blocks"] if block["type"] == "actions"]
    [pressed] = [element for element in buttons["elements"] if element["action_id"] == action_id]
    return {"type": "block_actions", "user": {"id": user}, "trigger_id": f"trigger-{time.monotonic_ns()}",
            "channel": {"id": message["channel"]}, "container": {"channel_id": message["channel"]},
            "response_url": "https://hooks.slack.invalid/actions/1", "actions": [pressed]}


def submit_edit(user: str, view: dict[str, Any], args_text: str) -> dict[str, Any]:
    """The view_submission payload of `user` submitting the edit modal with `args_text` typed in."""
    [block] = [block for block in view["blocks"] if block["type"] == "input"]
    state = {block["block_id"]: {block["element"]["action_id"]: {"type": "plain_text_input", "value": args_text}}}
    return {"type": "view_submission", "user": {"id": user},
            "view": {**view, "id": "V1", "state": {"values": state}}}
