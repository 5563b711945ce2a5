"""The codec endpoint: Temporal's codec-server protocol over this worker's key.

The Temporal Web UI and `temporal workflow show --codec-endpoint URL` POST
`{"payloads": [...]}` (protobuf JSON: base64 metadata values and data) to
`URL/decode` and `URL/encode`; the answer has the same shape. Key holders see
plaintext through it; the server, its database and everyone else see only
ciphertext. The browser calls it directly from the UI's origin, hence CORS
(app.py); `HITL_CODEC_TOKEN`, when set, must come as `Authorization: Bearer`.
"""

from __future__ import annotations

import os
import secrets
from typing import Any, Awaitable, Callable, Sequence

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Request
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec

router = APIRouter(prefix="/codec", tags=["codec"])


def require_codec_token(authorization: str | None = Header(default=None)) -> None:
    expected = os.environ.get("HITL_CODEC_TOKEN")
    if not expected:
        return
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip(), expected):
        raise HTTPException(status_code=401, detail="the codec endpoint needs Authorization: Bearer <HITL_CODEC_TOKEN>")


def codec_of(request: Request) -> PayloadCodec | None:
    return request.app.state.codec


async def transform(
    body: dict[str, Any], convert: Callable[[Sequence[Payload]], Awaitable[list[Payload]]] | None
) -> dict[str, Any]:
    try:
        payloads = json_format.ParseDict(body, Payloads()).payloads
    except json_format.ParseError as error:
        raise HTTPException(status_code=422, detail=f"not a Payloads object: {error}") from None
    converted = list(payloads) if convert is None else await convert(payloads)
    return json_format.MessageToDict(Payloads(payloads=converted))


@router.post("/decode", dependencies=[Depends(require_codec_token)])
async def decode(request: Request, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    """Decrypt what this service's keys can read; other payloads pass unchanged."""
    codec = codec_of(request)
    try:
        return await transform(body, codec.decode if codec else None)
    except ValueError as error:  # unknown key id, or a tampered payload
        raise HTTPException(status_code=422, detail=str(error) or "cannot decrypt this payload") from None


@router.post("/encode", dependencies=[Depends(require_codec_token)])
async def encode(request: Request, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    """Encrypt with the current key (the UI uses it to send signals and queries)."""
    codec = codec_of(request)
    return await transform(body, codec.encode if codec else None)
