"""Every request body is strict JSON, checked as a route reads it.

Python's `json` takes more than JSON: NaN and infinities, lone surrogates
(`"\\udfff"`), duplicated keys, nesting until the stack runs out. Each of those
went on to fail far from the request (a response that cannot be encoded, a
payload that cannot be sent, a RecursionError) and answered 500. So the body is
checked once, here, for every route: a body that is not JSON, or JSON this API
will not carry, is refused with 415 or 422 and a one-line reason before any
route sees it. The check runs when the route reads the body, not before, so a
door that refuses unread bodies (the codec's, hitl/api/codec.py) still does.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any, Awaitable, Callable

from fastapi import HTTPException

from workflows.limits import MAX_JSON_DEPTH

LARGEST_INTEGER = 2**63 - 1  # int64: the widest integer the Go, Java and .NET SDKs read from a JSON payload
LONG_DIGITS = re.compile(r"[0-9]{19}")  # an integer beyond 64 bits has as many; most bodies have none
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # what a lone surrogate is written as: UTF-8 cannot carry one
CHECKED_ASIDE_BYTES = 100_000  # a larger body is checked in a thread: the server answers others meanwhile

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BadBody(HTTPException):
    """A body this API will not read; FastAPI answers an HTTPException raised while it reads."""


def refusal_of(body: bytes, content_type: str | None) -> BadBody | None:
    """Why `body` is refused, or None: JSON, as the content type says, that can be carried as sent."""
    if not body:
        return None
    if not is_json(content_type):
        return BadBody(415, f"the body must be JSON (Content-Type: application/json), not {content_type!r:.80}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        return BadBody(422, f"the body is not UTF-8: byte {error.start} ({body[error.start:error.start + 1]!r}) {error.reason}")
    try:
        value = json.loads(text, parse_constant=no_constant, object_pairs_hook=no_duplicated_key,
                           parse_int=bounded_int if LONG_DIGITS.search(text) else int, parse_float=finite_float)
    except BadBody as refusal:
        return refusal
    except json.JSONDecodeError as error:
        return BadBody(422, f"the body is not JSON: {error.msg} at line {error.lineno} column {error.colno}")
    except RecursionError:
        return BadBody(422, f"the body is nested deeper than {MAX_JSON_DEPTH} levels")
    except ValueError:  # from bounded_int
        return BadBody(422, f"the body holds an integer beyond 64 bits (at most {LARGEST_INTEGER} either way)")
    problem = unsendable(value, text)
    return BadBody(422, f"the body {problem}") if problem else None


def is_json(content_type: str | None) -> bool:
    """No content type (FastAPI reads JSON then), application/json, or application/...+json."""
    if content_type is None:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def no_constant(name: str) -> Any:
    raise BadBody(422, f"the body holds {name}, which is not JSON: send a finite number or null")


def no_duplicated_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise BadBody(422, f"the body names the key {key!r:.60} twice in one object: which one counts is ambiguous")
            seen.add(key)
    return value


def bounded_int(digits: str) -> int:
    number = int(digits)  # ValueError past Python's own bound on digits: caught as beyond 64 bits too
    if not -LARGEST_INTEGER <= number <= LARGEST_INTEGER:
        raise ValueError(digits)
    return number


def finite_float(literal: str) -> float:
    number = float(literal)
    if number in (math.inf, -math.inf):  # 1e400 parses as infinity
        raise BadBody(422, f"the body holds the number {literal:.40}, beyond a double's range (about 1.8e308 either way)")
    return number


def unsendable(value: Any, text: str) -> str | None:
    """What in a parsed body no other part could carry faithfully: nesting past the bound, or a
    string that is not Unicode (a lone surrogate, which no UTF-8 encoding takes)."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and too_deep(value):
        return f"is nested deeper than {MAX_JSON_DEPTH} levels"
    if "\\u" in text and SURROGATE_ESCAPE.search(text):  # else no string can hold one: skip re-encoding
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as error:
            return (f"holds a lone surrogate ({error.object[error.start]!r}) in a string: "
                    "JSON text must be Unicode, which a surrogate alone is not")
    return None


def too_deep(value: Any) -> bool:
    """More than MAX_JSON_DEPTH levels of arrays and objects, counted a level at a time."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(MAX_JSON_DEPTH):
        level = [inner for item in level for inner in (item.values() if isinstance(item, dict) else item)
                 if isinstance(inner, (dict, list))]
        if not level:
            return False
    return True


# Doors whose bodies are another's format, checked by the route itself: Slack posts its
# interactions form-encoded (hitl/api/slack.py verifies their signature over the exact bytes).
FORM_DOORS = ("/channels/slack/interactions",)

# No route reads these methods' bodies; a streamed answer's disconnect listener receives one first, and
# must not be refused for it.
READ_NO_BODY = ("GET", "HEAD", "OPTIONS")


class StrictJsonBodies:
    """ASGI middleware: the body a route reads is refused (BadBody) once it has all come in, if
    `refusal_of` finds a reason; bodies nobody reads are never checked."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READ_NO_BODY or scope.get("path") in FORM_DOORS:
            await self.app(scope, receive, send)
            return
        content_type = next((value.decode("latin-1") for name, value in scope.get("headers") or []
                             if name.lower() == b"content-type"), None)
        body = bytearray()
        started = False

        async def checked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    refusal = (refusal_of(bytes(body), content_type) if len(body) <= CHECKED_ASIDE_BYTES
                               else await asyncio.to_thread(refusal_of, bytes(body), content_type))
                    if refusal is not None:
                        raise refusal
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, checked_receive, tracked_send)
        except BadBody as refusal:  # read outside a route's error handling
            if started:
                raise
            answer = json.dumps({"detail": refusal.detail}).encode()
            await send({"type": "http.response.start", "status": refusal.status_code,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
            await send({"type": "http.response.body", "body": answer})
