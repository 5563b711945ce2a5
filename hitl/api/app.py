"""The FastAPI application behind `python starter.py serve`.

Routers live beside this file, one per resource (sessions, calls, inbox, events,
the web page, the codec, A2A's door); this module only assembles them with what every route
shares: the Temporal connection, the tokens file, the operator's policy, the
decision-signing key, the limits on reading, the state shared between requests
(hitl/api/state/), and the answers every response gets (503 while Temporal or
that state is unreachable, no framing).
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from datetime import timedelta
from typing import Any, Mapping

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.service import RPCError

from hitl.api import (
    bulk, calls, codec, decide_links, delegations, events, inbox, people, sessions, slack, stats, web, web_sign_in as sign_in_routes,
)
from hitl.access import Policy
from hitl.api.auth import StreamTickets, TokenBook, TokenFileError, hide_queries_from_access_log
from hitl.api.body_limit import BodyLimit
from hitl.api.codec import CodecDoor, is_loopback
from hitl.api.followed import Followed
from hitl.api.gateway import Temporal, temporal_trouble, ticket_secret
from hitl.api.json_bodies import StrictJsonBodies
from hitl.api.observed import observe
from hitl.api.oidc import OpenIDConfigError, OpenIDProvider
from hitl.api.web_sign_in import WebSignIn
from hitl.api.owned_sessions import SessionsPerPerson
from hitl.api.reading import limits_from_env
from hitl.api.state import ApiState, StateConfigError, StateUnavailable, state_from_env
from hitl.channels import ChannelsError, channels_from_env
from hitl.decision_keys import KeyConfigError
from hitl.extras import MissingExtra, installed, require
from hitl.sdk_shortcuts import ShortcutSettingError, check_settings
from hitl.decision_keys import signing_key as read_signing_key
from hitl import telemetry
from hitl.settings import DATA_CONVERTER
from workflows.policy import PolicyError, policy_from_env

# The Web UI of `temporal server start-dev`, and the one docker-compose.yml runs, as a browser
# may spell either.
DEFAULT_UI_ORIGINS = "http://localhost:8233,http://127.0.0.1:8233,http://localhost:8080,http://127.0.0.1:8080"
# Every response may not be framed; the web page and /docs say more (hitl/api/web.py, DOCS_POLICY).
NO_FRAMING = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}
DOCS_POLICY = ("default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
               "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data: https://fastapi.tiangolo.com; "
               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def ui_origins() -> list[str]:
    setting = os.environ.get("HITL_CORS_ORIGINS", DEFAULT_UI_ORIGINS)
    return [origin.strip() for origin in setting.split(",") if origin.strip()]


# FastAPI 0.165 and later trace requests themselves (Python 3.10 installs an older one, which does not).
NATIVE_TELEMETRY_OFF: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}
)


def create_app(
    payload_codec: PayloadCodec | None = DATA_CONVERTER.payload_codec,
    *,
    client: Client | None = None,
    task_queue: str | None = None,
    tokens: TokenBook | Followed[TokenBook] | None = None,
    policy: Policy | Followed[Policy | None] | None | str = "from HITL_POLICY",
    openid: OpenIDProvider | None | str = "from HITL_OIDC_ISSUER",
    web_sign_in: WebSignIn | None | str = "from HITL_OIDC_CLIENT_ID",
    bind_host: str | None = None,
    slack_door: slack.SlackDoor | None | str = "from HITL_CHANNELS",
    api_state: ApiState | str = "from HITL_API_STATE",
) -> FastAPI:
    """The app; `client`, `task_queue`, `policy` and `slack_door` default to the environment's (tests
    pass their own). A malformed HITL_API_TOKENS, HITL_POLICY or HITL_CHANNELS file (or single sign-on
    setting) raises here, before anything is served."""
    # FastAPI's own telemetry stays off: it would open a second server span per request, in a
    # trace of its own, and record the query string, where an event stream's ticket travels.
    # The request span and metrics are hitl/api/observed.py's (path and route only).
    app = FastAPI(title="hitl-agent", description="A durable human-in-the-loop agent on Temporal",
                  **NATIVE_TELEMETRY_OFF)
    app.state.codec = payload_codec
    app.state.tokens = tokens if tokens is not None else TokenBook.from_env()
    app.state.openid = OpenIDProvider.from_env() if isinstance(openid, str) else openid
    app.state.web_sign_in = WebSignIn.from_env(app.state.openid) if isinstance(web_sign_in, str) else web_sign_in
    app.state.policy = operator_policy() if isinstance(policy, str) else policy
    app.state.temporal = Temporal(client=client, task_queue=task_queue)
    app.state.api_state = state_from_env() if isinstance(api_state, str) else api_state
    app.state.reads, app.state.streams, app.state.closed_reads = limits_from_env(app.state.api_state)
    app.state.sessions_per_person = SessionsPerPerson.from_env()
    app.state.codec_door = CodecDoor.from_env(bind_host, ui_origins())
    app.state.signer = lru_cache(maxsize=1)(signing_key)
    app.state.tickets = StreamTickets(lambda: ticket_secret(seed_of(app.state.signer()[1])), store=app.state.api_state)
    app.state.feeds = events.Feeds()
    app.state.slack = slack.slack_door(channels_from_env(), os.environ) if isinstance(slack_door, str) else slack_door
    app.state.used_links = decide_links.UsedLinks(app.state.api_state)
    app.state.decision_metrics = stats.DecisionMetrics()  # counts decisions made from now on (GET /metrics)
    app.state.scrape_token = stats.scrape_token_from_env()
    app.add_middleware(
        CORSMiddleware,
        allow_origins=ui_origins(),
        allow_credentials=True,  # the UI sends cookies and its own Authorization
        allow_methods=["POST", "GET", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "X-Namespace"],
    )
    app.add_middleware(NotFramed)
    app.add_middleware(StrictJsonBodies)  # inside the limit: it keeps what it checks
    app.add_middleware(BodyLimit)  # added late: it runs before anything reads a body
    observe(app)  # around it (reading no body), when operators ask for metrics or traces (docs/observability.md)
    app.include_router(codec.router)
    app.state.stand_in_grant = delegations.stand_in_grant  # every door's decision may be a stand-in's
    for resource in (sessions, calls, bulk, inbox, events, people, delegations, web, slack, sign_in_routes, decide_links, stats):
        app.include_router(resource.router)
    for router in protocol_routers(os.environ):
        app.include_router(router)
    hide_queries_from_access_log()

    @app.exception_handler(RPCError)
    @app.exception_handler(RuntimeError)
    async def temporal_unreachable(request: Request, error: Exception) -> JSONResponse:
        """A Temporal call that failed where a route did not expect it (an RPC it did not answer, a
        client that never connected: `temporal_trouble`) is 503, never 500; any other RuntimeError
        is a bug, answered 500 and logged."""
        if (trouble := temporal_trouble(error)) is not None:
            return JSONResponse({"detail": trouble}, status_code=503, headers={"Retry-After": "5"})
        logging.getLogger("hitl.api").error("unexpected error", exc_info=error)
        return JSONResponse({"detail": "internal error"}, status_code=500)

    @app.exception_handler(StateUnavailable)
    async def state_unreachable(request: Request, error: Exception) -> JSONResponse:
        """What the route needed of the shared state (a sign-in, a ticket, a limit) could not be
        read or kept: 503 with the one line, never an answer from this process's memory instead."""
        return JSONResponse({"detail": str(error)}, status_code=503, headers={"Retry-After": "5"})

    @app.get("/healthz", tags=["health"])
    async def healthz() -> JSONResponse:
        """The process probe, for load balancers and docker-compose health checks: no Temporal call;
        unhealthy (503) while the API's shared state does not answer."""
        problem = await app.state.api_state.problem()
        if problem is not None:
            return JSONResponse({"ok": False, "problem": problem}, status_code=503)
        return JSONResponse({"ok": True, "encryption": app.state.codec is not None})

    @app.get("/readyz", tags=["health"])
    async def readyz() -> JSONResponse:
        """200 when this API reaches Temporal (a cheap frontend call), 503 when it does not."""
        gateway: Temporal = app.state.temporal
        try:
            client = await gateway.get()
            await client.workflow_service.get_system_info(GetSystemInfoRequest(), retry=False,
                                                         timeout=timedelta(seconds=5))
        except (RPCError, HTTPException, RuntimeError) as error:
            return JSONResponse({"ready": False, "problem": getattr(error, "detail", None) or str(error)}, status_code=503)
        return JSONResponse({"ready": True, "namespace": client.namespace})

    return app


# The standard protocols the API can speak beside its own routes, each its own pip extra.
PROTOCOLS = ("ag-ui", "a2a")


def protocol_routers(environ: Mapping[str, str]) -> list[APIRouter]:
    """The routes of the protocols HITL_API_PROTOCOLS names (`ag-ui`, `a2a`, or `none`); unset, every
    one that is installed. Each protocol's library is imported here, only when it is mounted."""
    routers = []
    for protocol in protocols_from_env(environ):
        if protocol == "ag-ui":
            from hitl.api import ag_ui
            routers.append(ag_ui.router)
        else:
            from hitl.api import a2a
            routers.append(a2a.router)
    return routers


def protocols_from_env(environ: Mapping[str, str]) -> list[str]:
    setting = environ.get("HITL_API_PROTOCOLS")
    if setting is None or not setting.strip():
        return [protocol for protocol in PROTOCOLS if installed(protocol)]
    named = [name.strip().lower() for name in setting.split(",") if name.strip()]
    if named == ["none"]:
        return []
    for name in named:
        if name not in PROTOCOLS:
            raise StartRefused(f"HITL_API_PROTOCOLS: {name!r} is not one of {', '.join(PROTOCOLS)} (or none)")
        require(name, f"HITL_API_PROTOCOLS={setting.strip()}")
    return list(dict.fromkeys(named))


class NotFramed:
    """ASGI middleware: no response may be framed by another site (clickjacking); /docs gets a
    Content-Security-Policy that allows the Swagger UI it loads and nothing else."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope.get("path") in ("/docs", "/redoc", "/docs/oauth2-redirect")

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {name.lower() for name, _ in headers}
                extra = dict(NO_FRAMING)
                if docs:
                    headers = [(n, v) for n, v in headers if n.lower() != b"content-security-policy"]
                    present.discard(b"content-security-policy")
                    extra["Content-Security-Policy"] = DOCS_POLICY
                else:
                    extra.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
                headers += [(name.lower().encode(), value.encode()) for name, value in extra.items()
                            if name.lower().encode() not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def operator_policy() -> Followed[Policy | None] | None:
    """The operator's policy from HITL_POLICY (workflows/policy.py), followed as it changes; None
    without one. A malformed file raises PolicyError with a one-line reason."""
    path = os.environ.get("HITL_POLICY", "").strip()
    if not path:
        return None
    return Followed.read(Path(path), lambda at: policy_from_env({"HITL_POLICY": str(at)}))


def signing_key() -> tuple[str, Ed25519PrivateKey]:
    """The key decisions are signed with (hitl/decision_keys.py), read once on first use: without
    HITL_SIGNING_KEY, the local key file is created then, and a worker here trusts it."""
    return read_signing_key()


def seed_of(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def serve(host: str | None = None, port: int | None = None) -> None:
    """Run the API with uvicorn on HITL_API_HOST:HITL_API_PORT (127.0.0.1:8000)."""
    import uvicorn

    host = host or os.environ.get("HITL_API_HOST", "127.0.0.1")
    try:
        refuse_an_open_codec(host)
        check_settings()  # HITL_QUERY_BUFFER_RETRY, read by every query the API sends
        for line in telemetry.start("hitl-api", "HITL_API_METRICS_PORT"):  # before the API's client connects
            print(f"api: {line}")
        app = create_app(bind_host=host)
        print(f"api: state kept in {app.state.api_state.describe()}")
        signing_key()  # a malformed key stops the server now; a local key file is made now
    except (TokenFileError, OpenIDConfigError, KeyConfigError, PolicyError, ChannelsError, StartRefused,
            MissingExtra, ShortcutSettingError, StateConfigError, telemetry.TelemetryError) as error:
        sys.exit(f"error: {error}")
    uvicorn.run(app, host=host, port=port or int(os.environ.get("HITL_API_PORT", "8000")))


class StartRefused(ValueError):
    """A setting this server will not run with."""


def refuse_an_open_codec(host: str) -> None:
    """Beyond loopback the codec endpoint would decrypt for anyone who reaches the port: a token is
    then required, unless the operator says only this machine reaches it (HITL_API_LOOPBACK_ONLY,
    e.g. a container port published on 127.0.0.1, as docker-compose.yml does)."""
    if is_loopback(host) or os.environ.get("HITL_CODEC_TOKEN"):
        return
    if os.environ.get("HITL_API_LOOPBACK_ONLY", "").lower() in ("1", "true", "yes"):
        return
    raise StartRefused(f"the API would listen on {host}, beyond loopback, with a codec endpoint anyone there could "
                       "decrypt with: set HITL_CODEC_TOKEN (or HITL_API_LOOPBACK_ONLY=true if only this machine "
                       "reaches the port)")
