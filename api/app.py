"""The FastAPI application behind `python starter.py serve`.

Routers live beside this file, one per resource (codec.py today); this module
only assembles them with the settings every route shares.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from temporalio.converter import PayloadCodec

from api import codec
from settings import DATA_CONVERTER

# The Web UI of `temporal server start-dev`, and the one docker-compose.yml runs.
DEFAULT_UI_ORIGINS = "http://localhost:8233,http://localhost:8080"


def ui_origins() -> list[str]:
    setting = os.environ.get("HITL_CORS_ORIGINS", DEFAULT_UI_ORIGINS)
    return [origin.strip() for origin in setting.split(",") if origin.strip()]


def create_app(payload_codec: PayloadCodec | None = DATA_CONVERTER.payload_codec) -> FastAPI:
    app = FastAPI(title="hitl-agent", description="A durable human-in-the-loop agent on Temporal")
    app.state.codec = payload_codec
    app.add_middleware(
        CORSMiddleware,
        allow_origins=ui_origins(),
        allow_credentials=True,  # the UI sends cookies and its own Authorization
        allow_methods=["POST", "GET", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "X-Namespace"],
    )
    app.include_router(codec.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, object]:
        """For load balancers and docker-compose health checks."""
        return {"ok": True, "encryption": app.state.codec is not None}

    return app


def serve(host: str | None = None, port: int | None = None) -> None:
    """Run the API with uvicorn on HITL_API_HOST:HITL_API_PORT (127.0.0.1:8000)."""
    import uvicorn

    uvicorn.run(
        create_app(),
        host=host or os.environ.get("HITL_API_HOST", "127.0.0.1"),
        port=port or int(os.environ.get("HITL_API_PORT", "8000")),
    )
