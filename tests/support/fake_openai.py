"""An OpenAI-compatible chat-completions server on loopback, scripted by the test.

The product talks to it through the real `openai` client over real HTTP, so
the request we send and the errors we classify are the ones a provider sees.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)  # JSON-encoded, whatever its shape
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent as is instead of `body`
    echo_authorization: bool = False  # an error body that quotes the request's Authorization header

    def encoded(self, authorization: str) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.echo_authorization:
            return json.dumps({
                "error": {"message": f"Invalid credentials in header 'Authorization: {authorization}'",
                          "type": "invalid_request_error", "received": {"authorization": authorization}},
            }).encode()
        return json.dumps(self.body).encode()


def text(content: str) -> Reply:
    return completion({"role": "assistant", "content": content})


def tool_calls(*calls: tuple[str, str, Any]) -> Reply:
    """Calls as (id, name, arguments); arguments that are not a str are JSON-encoded."""
    return completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
                for call_id, name, args in calls
            ],
        }
    )


def error(status: int, message: str, **headers: str) -> Reply:
    return Reply(status, {"error": {"message": message, "type": "test_error"}}, headers)


def echoing_authorization(status: int, **headers: str) -> Reply:
    """An error whose body repeats the API key it was sent, as some providers and proxies do."""
    return Reply(status, headers=headers, echo_authorization=True)


def malformed(body: Any = None, raw: bytes | None = None) -> Reply:
    """A 200 whose body is not a chat completion: any JSON value, or raw bytes."""
    return Reply(200, body, raw=raw)


def completion(message: dict[str, Any]) -> Reply:
    return Reply(
        200,
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    )


class FakeOpenAI:
    """Answers each request with the next scripted reply; records what it was sent."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.routes: list[tuple[str, Reply]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(request)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = fake._reply_to(request)
                body = reply.encoded(self.headers.get("authorization", ""))
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def route(self, marker: str, reply: Reply) -> None:
        """Answer every request whose first user message contains `marker` with `reply`,
        so concurrent sessions can each get their own answer."""
        with self._lock:
            self.routes.append((marker, reply))

    def _reply_to(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        first_user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        for marker, reply in self.routes:
            if marker in first_user:
                return reply
        return self.replies.pop(0) if self.replies else error(500, "the test scripted no more replies")

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
