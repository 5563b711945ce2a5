"""A ceiling on request bodies, checked before anything reads them.

FastAPI reads and parses a JSON body before it runs the route's dependencies,
so without this a caller with no token could make the API hold gigabytes in
memory: a 401 comes only once the whole body is in. Nothing legitimate comes
near the ceiling (Temporal takes no payload over 2 MB; the codec's base64 of
one is under 3 MB).
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from fastapi import HTTPException

MAX_BODY_BYTES = 8_000_000

Scope = dict[str, Any]
Message = dict[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """Raised while the body streams in; FastAPI passes an HTTPException on as its status."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over {limit} bytes")


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, by its Content-Length or as it streams in."""

    def __init__(self, app: App, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self.refuse(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                await self.refuse(send)

    async def refuse(self, send: Callable[[Message], Awaitable[None]]) -> None:
        body = json.dumps({"detail": f"the request body is over {self.limit} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
