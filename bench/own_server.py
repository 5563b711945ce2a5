"""A benchmark's own dev server: free ports, a folder of its own, stopped and removed afterwards."""

from __future__ import annotations

import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

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
