"""The FastAPI application behind `python starter.py serve`.

Routers live beside this file, one per resource (sessions, calls, inbox, events,
the web page, the codec); this module only assembles them with what every route
shares: the Temporal connection, the tokens file and the decision-signing key.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from temporalio.client import Client
from temporalio.converter import PayloadCodec

from api import calls, codec, events, inbox, people, sessions, web
from api.auth import StreamTickets, TokenBook, TokenFileError
from api.body_limit import BodyLimit
from api.gateway import Temporal, ticket_secret
from api.observed import observe
from decision_keys import KeyConfigError
from decision_keys import signing_key as read_signing_key
import telemetry
from settings import DATA_CONVERTER

# The Web UI of `temporal server start-dev`, and the one docker-compose.yml runs.
DEFAULT_UI_ORIGINS = "http://localhost:8233,http://localhost:8080"


def ui_origins() -> list[str]:
    setting = os.environ.get("HITL_CORS_ORIGINS", DEFAULT_UI_ORIGINS)
    return [origin.strip() for origin in setting.split(",") if origin.strip()]


def create_app(
    payload_codec: PayloadCodec | None = DATA_CONVERTER.payload_codec,
    *,
    client: Client | None = None,
    task_queue: str | None = None,
    tokens: TokenBook | None = None,
) -> FastAPI:
    """The app; `client` and `task_queue` default to the environment's (tests pass their own).
    A malformed HITL_API_TOKENS file raises TokenFileError here, before anything is served."""
    app = FastAPI(title="hitl-agent", description="A durable human-in-the-loop agent on Temporal")
    app.state.codec = payload_codec
    app.state.tokens = tokens if tokens is not None else TokenBook.from_env()
    app.state.temporal = Temporal(client=client, task_queue=task_queue)
    app.state.signer = lru_cache(maxsize=1)(signing_key)
    app.state.tickets = StreamTickets(lambda: ticket_secret(seed_of(app.state.signer()[1])))
    app.state.feeds = events.Feeds()
    app.add_middleware(
        CORSMiddleware,
        allow_origins=ui_origins(),
        allow_credentials=True,  # the UI sends cookies and its own Authorization
        allow_methods=["POST", "GET", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "X-Namespace"],
    )
    app.add_middleware(BodyLimit)  # added late: it runs before anything reads a body
    observe(app)  # around it (reading no body), when operators ask for metrics or traces (docs/observability.md)
    app.include_router(codec.router)
    for resource in (sessions, calls, inbox, events, people, web):
        app.include_router(resource.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, object]:
        """For load balancers and docker-compose health checks."""
        return {"ok": True, "encryption": app.state.codec is not None}

    return app


def signing_key() -> tuple[str, Ed25519PrivateKey]:
    """The key decisions are signed with (decision_keys.py), read once on first use: without
    HITL_SIGNING_KEY, the local key file is created then, and a worker here trusts it."""
    return read_signing_key()


def seed_of(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def serve(host: str | None = None, port: int | None = None) -> None:
    """Run the API with uvicorn on HITL_API_HOST:HITL_API_PORT (127.0.0.1:8000)."""
    import uvicorn

    try:
        for line in telemetry.start("hitl-api", "HITL_API_METRICS_PORT"):  # before the API's client connects
            print(f"api: {line}")
        app = create_app()
        signing_key()  # a malformed key stops the server now; a local key file is made now
    except (TokenFileError, KeyConfigError, telemetry.TelemetryError) as error:
        sys.exit(f"error: {error}")
    uvicorn.run(
        app,
        host=host or os.environ.get("HITL_API_HOST", "127.0.0.1"),
        port=port or int(os.environ.get("HITL_API_PORT", "8000")),
    )
