"""The worker's heartbeat file: rewritten while its pollers run, read by the health check.

Is this worker alive and polling? The file is read by `python worker.py --check` (the
container's health check).

Temporal's list of a task queue's pollers keeps a worker for a while after it died, so a check
that asked the server said "healthy" of a stopped worker. The worker process itself is the only
witness: while its Temporal worker runs it rewrites HITL_WORKER_HEARTBEAT every BEAT_SECONDS, and
removes the file when it stops. A file older than STALE_SECONDS means a worker killed without a
goodbye (SIGKILL, OOM) or one whose event loop no longer turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Callable, Mapping

VARIABLE = "HITL_WORKER_HEARTBEAT"
BEAT_SECONDS = 2.0
STALE_SECONDS = 10.0


def heartbeat_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    value = environ.get(VARIABLE, "").strip()
    return Path(value) if value else None


async def beat(path: Path, polling: Callable[[], bool], about: str) -> None:
    """Rewrite `path` every BEAT_SECONDS while `polling()` holds; remove it when cancelled or when polling stops."""
    try:
        while polling():
            written = path.with_name(path.name + ".new")
            written.write_text(f"{about}\n")
            written.replace(path)  # a reader never sees a half-written file
            await asyncio.sleep(BEAT_SECONDS)
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def check(path: Path | None, now: float | None = None) -> tuple[bool, str]:
    """(alive, the line to print) for the worker that beats into `path`."""
    if path is None:
        return False, (f"{VARIABLE} is not set: set it to the same file path for the worker and its health check "
                       "(docs/production.md, \"Running workers in production\")")
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
        about = path.read_text().strip()
    except FileNotFoundError:
        return False, f"not polling: no heartbeat in {path} (the worker is stopped, or not connected yet)"
    if age > STALE_SECONDS:
        return False, f"not polling: the heartbeat in {path} is {age:.0f} s old (the worker was killed, or hangs)"
    return True, f"polling: {about} (heartbeat {max(age, 0):.1f} s ago)"
