"""A benchmark's own servers: a dev server in a folder of its own, and an ASGI app served on a
loopback port; free ports, each stopped (and the folder removed) when its block ends."""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import uvicorn
from temporalio.client import Client

from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server


@asynccontextmanager
async def own_dev_server() -> AsyncIterator[tuple[Client, str, Path]]:
    """(a client, the server's address, a scratch folder) for as long as the block runs."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port = free_port()
        server = start_dev_server(folder / "temporal.db", port=port, ui_port=free_port())
        try:
            yield await connect_when_ready(f"127.0.0.1:{port}"), f"127.0.0.1:{port}", folder
        finally:
            stop_dev_server(server)


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    """The app's base URL, served by uvicorn in this process for as long as the block runs."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():  # it stopped before it started: its own error says why
                await serving
                raise RuntimeError(f"the app did not start on port {port}")
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
