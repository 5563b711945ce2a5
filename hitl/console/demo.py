"""The one-command demo: the embedded dev server, a worker and the chat, in one process.

The dev server keeps its SQLite file under .hitl/, so stopping the demo and
starting it again finds the session where it paused.

Everything the demo creates is private to its user (files 0600, folders
0700): the server's database and the workspace hold conversations, email
bodies and tool arguments.
"""

from __future__ import annotations

import fcntl
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from activities.model import backend_from_env
from activities.scripted_model import ScriptError
from activities.tools import workspace as product_files
from hitl.console.chat import Chat
from hitl.startup import quiet_expected_failures
from hitl.devserver import DevServerError, connect_when_ready, is_listening, start_dev_server, stop_dev_server
from hitl.settings import Settings, connect
from hitl.worker import build_worker

STATE_FOLDER = Path(product_files.STATE_FOLDER)
# The Web UI of the dev server the demo starts; its frontend listens on TEMPORAL_ADDRESS's port.
# Both are settings so a second server (a test's, another demo's in another checkout) can run beside one.
DEFAULT_UI_PORT = 8233


def ui_port(environ: Mapping[str, str] = os.environ) -> int:
    text = environ.get("HITL_UI_PORT", "").strip()
    if not text:
        return DEFAULT_UI_PORT
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise SystemExit(f"demo: HITL_UI_PORT must be a port number, not {text!r}")
    return int(text)  # reserved in a workspace too, if one is run here
SAMPLE_DOCUMENTS = {
    "notes.txt": "Remember to renew the passport before the Beijing trip.\n",
    "travel-policy.md": "# Travel policy\n\nFlights over 1000 EUR need a manager's approval. Book economy for trips under 6 hours.\n",
    "menu.txt": "Friday lunch: dumplings, noodles, green tea.\n",
    # The README's tours run one after the other in this workspace, each deleting a file a later one
    # does not name: notes.txt (tour-1), menu.txt (tour-2), agenda.txt (web-1).
    "agenda.txt": "Last week's agenda: plan the Beijing trip, read the travel policy.\n",
}


def seed_workspace(workspace: Path) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    if any(workspace.iterdir()):
        return
    for name, text in SAMPLE_DOCUMENTS.items():
        (workspace / name).write_text(text)


@contextmanager
def private_files() -> Iterator[None]:
    """Files and folders created meanwhile, by this process or the dev server it
    starts (a child inherits the mask), are readable by their owner alone."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


class DemoRunning(Exception):
    """Another demo runs from this checkout: it owns the dev server this one would share."""


@contextmanager
def the_only_demo_here() -> Iterator[None]:
    """A lock on .hitl/demo.lock for as long as this demo runs. A second demo would attach to the
    first one's dev server and session, and the first one's Ctrl-C would stop the server under it."""
    STATE_FOLDER.mkdir(mode=0o700, exist_ok=True)
    with open(STATE_FOLDER / "demo.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise DemoRunning(lock.read().strip() or "?") from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        yield  # the lock goes with the file when it closes, or when the process dies


async def run_demo(settings: Settings, session_id: str, by: str) -> int:
    quiet_expected_failures()  # the worker's log shares the chat's terminal
    with private_files():
        try:
            with the_only_demo_here():
                return await _run_demo(settings, session_id, by)
        except DemoRunning as running:
            print(f"error: another ./demo.sh is running from this folder (pid {running}); use that one, or leave "
                  "it (Ctrl-C) and start this again: two would share one dev server and session", file=sys.stderr)
            return 1


async def _run_demo(settings: Settings, session_id: str, by: str) -> int:
    host, _, port = settings.address.rpartition(":")
    server = None
    if not is_listening(host or "localhost", int(port)):
        STATE_FOLDER.mkdir(mode=0o700, exist_ok=True)
        STATE_FOLDER.chmod(0o700)  # also a folder an older demo made world-readable
        web_ui = ui_port()
        try:
            server = start_dev_server(STATE_FOLDER / "temporal.db", port=int(port), ui_port=web_ui)
        except DevServerError as error:
            print(f"error: {error}; another port: TEMPORAL_ADDRESS=localhost:<port> or HITL_UI_PORT=<port> "
                  "(./demo.sh --help)", file=sys.stderr)
            return 1
        print(f"(Temporal dev server on {settings.address}, data in {STATE_FOLDER / 'temporal.db'}, "
              f"Web UI http://localhost:{web_ui})")
    else:
        print(f"(using the Temporal server already on {settings.address}; this demo did not start it, "
              "so it keeps running when you leave)")
    try:
        seed_workspace(settings.workspace)
        try:
            backend = backend_from_env(settings)
        except ScriptError as error:
            raise SystemExit(f"demo: {error}") from None
        print(f"(model: {backend.description}; workspace: {settings.workspace.resolve()})")
        client = await (connect_when_ready(settings.address, settings.namespace) if server else connect(settings))
        async with build_worker(client, settings.task_queue, backend, settings.workspace):
            return await Chat(client, settings.task_queue, session_id, by, started_with="./demo.sh", check_worker=False).run()
    finally:
        if server is not None:
            stop_dev_server(server)
