"""The codec endpoint: Temporal's codec-server protocol over this worker's key.

The Temporal Web UI and `temporal workflow show --codec-endpoint URL` POST
`{"payloads": [...]}` (protobuf JSON: base64 metadata values and data) to
`URL/decode` and `URL/encode`; the answer has the same shape. Key holders see
plaintext through it; the server, its database and everyone else see only
ciphertext. The browser calls it directly from the UI's origin, hence CORS
(app.py).

It decrypts for whoever reaches it, so before a byte of the body is read:
- the Host must be one of this machine's own names (localhost, 127.0.0.1, [::1],
  the bind host) or one in `HITL_ALLOWED_HOSTS`: a web page that rebinds its own
  name to 127.0.0.1 (DNS rebinding) sends its own name as the Host;
- an Origin, when sent, must be an allowed UI origin (`HITL_CORS_ORIGINS`);
- `HITL_CODEC_TOKEN`, when set, must come as `Authorization: Bearer` (and the
  server refuses to listen beyond loopback without one: app.py);
- at most `HITL_CODEC_CONCURRENCY` requests are in flight (429 beyond), and a
  body is read up to `HITL_CODEC_MAX_BYTES` (413 beyond).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from fastapi import APIRouter, Depends, HTTPException, Request
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec

from hitl.api.reading import setting

router = APIRouter(prefix="/codec", tags=["codec"])

OWN_NAMES = ("localhost", "127.0.0.1", "::1")



@dataclass
class CodecDoor:
    """What the endpoint lets in: names, origins, the token, and how many at once."""

    hosts: frozenset[str]
    origins: frozenset[str]
    token: str | None
    concurrency: int
    max_bytes: int
    in_flight: int = 0

    @classmethod
    def from_env(cls, bind_host: str | None, origins: list[str]) -> CodecDoor:
        listed = [name.strip().lower() for name in os.environ.get("HITL_ALLOWED_HOSTS", "").split(",") if name.strip()]
        own = {*OWN_NAMES, *listed, *([bind_host.strip("[]").lower()] if bind_host else [])}
        return cls(hosts=frozenset(own), origins=frozenset(origins), token=os.environ.get("HITL_CODEC_TOKEN") or None,
                   concurrency=setting("HITL_CODEC_CONCURRENCY", 4), max_bytes=setting("HITL_CODEC_MAX_BYTES", 8_000_000))


def host_name(host_header: str) -> str:
    """`example.org:8000` -> `example.org`; `[::1]:8000` -> `::1`."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(bind_host: str) -> bool:
    return bind_host.strip("[]").lower() in OWN_NAMES or bind_host.startswith("127.")


def door_of(request: Request) -> CodecDoor:
    return request.app.state.codec_door


async def admitted(request: Request) -> AsyncIterator[None]:
    """Host, Origin, token, then a slot: each refusal costs nothing, the body is still unread."""
    door = door_of(request)
    host = host_name(request.headers.get("host", ""))
    if host not in door.hosts:
        raise HTTPException(403, f"the codec endpoint answers requests addressed to this machine only, not to {host!r} "
                                 "(HITL_ALLOWED_HOSTS lists more names)")
    origin = request.headers.get("origin")
    if origin is not None and origin.rstrip("/") not in door.origins:
        raise HTTPException(403, f"origin {origin!r} may not use the codec endpoint (HITL_CORS_ORIGINS)")
    if door.token is not None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), door.token.encode()):
            raise HTTPException(401, "the codec endpoint needs Authorization: Bearer <HITL_CODEC_TOKEN>")
    if door.in_flight >= door.concurrency:
        raise HTTPException(429, f"the codec endpoint is busy ({door.concurrency} requests at once, "
                                 "HITL_CODEC_CONCURRENCY); try again", headers={"Retry-After": "1"})
    door.in_flight += 1
    try:
        yield
    finally:
        door.in_flight -= 1


async def payloads_in(request: Request) -> dict[str, Any]:
    limit = door_of(request).max_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"the codec endpoint takes at most {limit} bytes (HITL_CODEC_MAX_BYTES)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"the codec endpoint takes at most {limit} bytes (HITL_CODEC_MAX_BYTES)")
    try:
        parsed = json.loads(bytes(body))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise HTTPException(422, f"not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise HTTPException(422, "not a Payloads object: send {\"payloads\": [...]}")
    return parsed


def codec_of(request: Request) -> PayloadCodec | None:
    return request.app.state.codec


async def transform(
    body: dict[str, Any], convert: Callable[[Sequence[Payload]], Awaitable[list[Payload]]] | None
) -> dict[str, Any]:
    try:
        payloads = json_format.ParseDict(body, Payloads()).payloads
    except json_format.ParseError as error:
        # protobuf's reason runs over two lines (the fields it knows on the second): the answer is one
        raise HTTPException(status_code=422, detail=f"not a Payloads object: {' '.join(str(error).split())}") from None
    converted = list(payloads) if convert is None else await convert(payloads)
    return json_format.MessageToDict(Payloads(payloads=converted))


@router.post("/decode", dependencies=[Depends(admitted)])
async def decode(request: Request) -> dict[str, Any]:
    """Decrypt what this service's keys can read; other payloads pass unchanged."""
    body = await payloads_in(request)
    codec = codec_of(request)
    try:
        return await transform(body, codec.decode if codec else None)
    except ValueError as error:  # unknown key id, or a tampered payload
        raise HTTPException(status_code=422, detail=str(error) or "cannot decrypt this payload") from None


@router.post("/encode", dependencies=[Depends(admitted)])
async def encode(request: Request) -> dict[str, Any]:
    """Encrypt with the current key (the UI uses it to send signals and queries)."""
    body = await payloads_in(request)
    codec = codec_of(request)
    return await transform(body, codec.encode if codec else None)
