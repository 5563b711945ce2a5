"""Helpers for the production tests: a private file-backed dev server, product
processes (`worker.py`, `starter.py serve`), the `temporal` CLI, keys."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from hitl.devserver import free_port, start_dev_server, stop_dev_server, temporal_binary

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class DevServer:
    address: str
    database: Path

    def stored_bytes(self) -> bytes:
        """Everything the server has written: the SQLite file and its write-ahead log."""
        return b"".join(path.read_bytes() for path in self.database.parent.glob(self.database.name + "*"))


@contextmanager
def private_dev_server(folder: Path) -> Iterator[DevServer]:
    """A dev server of our own, so a test can read its database file."""
    port = free_port()
    database = folder / "temporal.db"
    process = start_dev_server(database, port=port, ui_port=free_port())
    try:
        yield DevServer(f"127.0.0.1:{port}", database)
    finally:
        stop_dev_server(process)


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def nobody_listens() -> str:
    """An address where no Temporal server is (a free loopback port), for processes meant to stop before
    they connect: never a developer's own server on the default localhost:7233."""
    return f"127.0.0.1:{free_port()}"


def product_env(**variables: str) -> dict[str, str]:
    """The environment of a product process: ours, minus any real model or cluster settings."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("TEMPORAL_", "HITL_", "OPENAI_"))}
    return {**env, **variables}


@contextmanager
def api_server(log: Path, **variables: str) -> Iterator[str]:
    """`python starter.py serve` on a free port; yields its base URL once /healthz answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "starter.py", "serve", "--port", str(port)],
        cwd=ROOT, env=product_env(**variables), stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"starter.py serve did not come up; see {log}") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=15)


def temporal_cli(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """The real `temporal` CLI, with only the given TEMPORAL_* settings."""
    return subprocess.run([temporal_binary(), *args], env=product_env(**variables),
                          capture_output=True, text=True, timeout=60)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


async def run_product(script: str, *args: str, **variables: str) -> Ran:
    """`python worker.py|starter.py ...` without blocking the event loop (a test's proxy may live on it)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, script, *args, cwd=ROOT, env=product_env(**variables),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return Ran(process.returncode or 0, out.decode(), err.decode())


async def run_starter(*args: str, **variables: str) -> Ran:
    return await run_product("starter.py", *args, **variables)
