"""A real `redis-server` (Debian's package, which .ci/run installs) on a free loopback port, for the
API's shared state (HITL_API_STATE): started by the test, stopped and started again when a test
needs Redis down, and stopped after. Nothing is saved to disk.

A test module imports the `redis_server` fixture from here.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from hitl.devserver import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
START_SECONDS = 20


class RedisServer:
    """One redis-server process; `url` is what HITL_API_STATE is set to."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it on its port and wait until it answers PING (fails with its output otherwise)."""
        log = self.directory / "redis.log"
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), "--logfile", str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while not self.answers():
            if self.process.poll() is not None:
                raise AssertionError(f"redis-server exited ({self.process.returncode}): "
                                     f"{log.read_text() if log.exists() else 'no log'}")
            if time.monotonic() > deadline:
                raise AssertionError(f"redis-server did not answer PING on port {self.port} within {START_SECONDS}s")
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as probe:
                probe.sendall(b"PING\r\n")
                return probe.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
