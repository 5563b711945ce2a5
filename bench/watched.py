"""What watching sessions costs: open event streams (`GET /sessions/{id}/events`) on paused sessions.

    python -m bench.watched [--sessions 100] [--streams 200] [--seconds 20]

One dev server, one worker and the API in this process. `sessions` sessions are
started and left waiting for an approval; then `streams` server-sent-event
streams are opened, spread over the sessions and over as many people as the
per-person stream limit needs (each person owns the sessions they watch), and
held open for `seconds`. Measured over the same window with no stream open,
then with them: CPU seconds per second of this process (API and worker) and of
the Temporal server, and the queries the API's feeds sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2 as httpx

from activities.offline_model import OfflineModel
from bench.own_server import served
from hitl.api.app import create_app
from hitl.api.auth import TokenBook
from hitl.api.owned_sessions import SessionsPerPerson
from hitl.api.reading import limits_from_env
from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from hitl.worker import build_worker

TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu(pid: int) -> float:
    """CPU seconds a process (and the children it waited for) has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / TICKS


async def measure(seconds: float, server_pid: int) -> tuple[float, float]:
    began, mine, theirs = time.monotonic(), time.process_time(), server_cpu(server_pid)
    await asyncio.sleep(seconds)
    wall = time.monotonic() - began
    return (time.process_time() - mine) / wall, (server_cpu(server_pid) - theirs) / wall


async def hold(http: httpx.AsyncClient, session_id: str, opened: asyncio.Event, stop: asyncio.Event) -> None:
    async with http.stream("GET", f"/sessions/{session_id}/events") as stream:
        assert stream.status_code == 200, await stream.aread()
        opened.set()
        async for _ in stream.aiter_lines():
            if stop.is_set():
                return


async def bench(sessions: int, streams: int, seconds: float, folder: Path) -> str:
    streams_each, sessions_each = limits_from_env()[1].limit, SessionsPerPerson.from_env().limit
    people = [f"watcher{index}" for index in range(max(1, -(-streams // streams_each), -(-sessions // sessions_each)))]
    tokens = {f"bench-token-{person}-0123456789": person for person in people}
    port = free_port()
    server = start_dev_server(folder / "temporal.db", port=port, ui_port=free_port())
    try:
        client = await connect_when_ready(f"127.0.0.1:{port}")
        task_queue = f"bench-watched-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, task_queue, OfflineModel(), folder / "workspace"):
            app = create_app(client=client, task_queue=task_queue, tokens=TokenBook(tokens, "bench"), policy=None)
            async with served(app) as base_url, AsyncExitStack() as open_clients:
                clients = {person: await open_clients.enter_async_context(httpx.AsyncClient(
                    base_url=base_url, timeout=120, headers={"Authorization": f"Bearer {token}"}))
                    for token, person in tokens.items()}
                owned: list[tuple[str, str]] = []  # (person, session)
                for index in range(sessions):
                    person = people[index % len(people)]
                    started = await clients[person].post("/sessions", json={
                        "message": "please delete notes.txt", "verified_decisions": False})
                    assert started.status_code == 201, started.text
                    owned.append((person, started.json()["session_id"]))
                idle = await measure(seconds, server.pid)
                stop, tasks = asyncio.Event(), []
                for index in range(streams):
                    person, session_id = owned[index % len(owned)]
                    opened = asyncio.Event()
                    tasks.append(asyncio.create_task(hold(clients[person], session_id, opened, stop)))
                    await asyncio.wait_for(opened.wait(), 60)
                watched = await measure(seconds, server.pid)
                stop.set()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        stop_dev_server(server)
    return "\n".join([
        f"{sessions} sessions waiting for an approval; {streams} event streams over them, "
        f"{len(people)} people; {seconds:g} s each",
        f"{'':<22}{'API + worker, cores':>22}{'Temporal server, cores':>26}",
        f"{'no stream open':<22}{idle[0]:>22.3f}{idle[1]:>26.3f}",
        f"{f'{streams} streams open':<22}{watched[0]:>22.3f}{watched[1]:>26.3f}",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print(asyncio.run(bench(args.sessions, args.streams, args.seconds, Path(folder))))


if __name__ == "__main__":
    main()
