"""A SIGTERM at any moment of a worker's life ends it cleanly, with exit code 0.

The worker printed its banner and connected before it listened for signals: a SIGTERM in
between (a deploy, or a test that had read the banner, on a busy machine) ended it by the
signal's default action, exit code -15; and one that could not reach its server yet could not
be stopped by SIGTERM at all once it did listen.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from hitl.devserver import free_port
from tests.support.sessions import eventually
from tests.support.stack import ROOT, product_env


async def test_a_worker_that_cannot_reach_its_server_yet_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    unreachable = f"127.0.0.1:{free_port()}"  # nothing listens: the worker retries its connection
    worker = subprocess.Popen(
        [sys.executable, "worker.py"], cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env=product_env(TEMPORAL_ADDRESS=unreachable, HITL_WORKSPACE=str(tmp_path / "workspace")),
    )
    try:
        await eventually(lambda: asyncio.sleep(0, log.read_text(errors="replace")),
                         lambda out: f"cannot reach Temporal at TEMPORAL_ADDRESS={unreachable}" in out)
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert code == 0, log.read_text(errors="replace")
    assert "worker: shutting down" in log.read_text(errors="replace")
