"""What a read of a closed session costs through the HTTP API, replayed each time or kept once.

    python -m bench.closed_read [--steps 300] [--reads 10]

One session on its own dev server and worker: a turn of `steps` tool calls (a
few thousand history events), then cancelled, so closed. Each `GET` of it is
timed, as its owner, `reads` times per route:

- replayed: the API's cache of closed runs is turned off, so every read asks
  the session's queries, and the worker replays the closed run's whole history
  to answer each one (what every read did before the cache);
- kept: the cache on (the default): the first read replays, the others are
  answered from the cache, keyed by (session, run).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import httpx2 as httpx

from bench.own_server import own_dev_server, served
from hitl.api.app import create_app
from hitl.api.auth import TokenBook
from tests.support.scripted_model import LongTurnModel
from hitl.client.sessions import measure_history
from hitl.worker import build_worker

TOKEN = "bench-token-0123456789abcdef"
ROUTES = ("", "/transcript", "/audit")


async def timed_reads(http: httpx.AsyncClient, session_id: str, reads: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {route: [] for route in ROUTES}
    for _ in range(reads):
        for route in ROUTES:
            began = time.perf_counter()
            answer = await http.get(f"/sessions/{session_id}{route}")
            seconds[route].append(time.perf_counter() - began)
            assert answer.status_code == 200, answer.text
    return seconds


async def bench(steps: int, reads: int) -> str:
    async with own_dev_server() as (client, _, folder):
        task_queue = f"bench-closed-{uuid.uuid4().hex[:8]}"
        model = LongTurnModel(steps, 200, remember_requests=False)
        async with build_worker(client, task_queue, model, folder / "workspace"):
            app = create_app(client=client, task_queue=task_queue, tokens=TokenBook({TOKEN: "ana"}, "bench"), policy=None)
            async with served(app) as base_url, httpx.AsyncClient(
                    base_url=base_url, timeout=600, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                started = await http.post("/sessions", json={"message": "work through the long task",
                                                             "max_steps": steps, "verified_decisions": False})
                assert started.status_code == 201, started.text
                session_id = started.json()["session_id"]
                assert (await http.post(f"/sessions/{session_id}/cancel", json={})).status_code == 200
                while (await http.get(f"/sessions/{session_id}")).json()["state"] != "closed":
                    await asyncio.sleep(0.2)
                history = await measure_history(client, session_id)

                kept = app.state.closed_reads
                app.state.closed_reads = type(kept)(entries=0, max_bytes=0)  # nothing kept: every read replays
                replayed = await timed_reads(http, session_id, reads)
                app.state.closed_reads = kept
                cached = await timed_reads(http, session_id, reads)
    lines = [f"closed session: {history.events} events, {history.bytes / 1e6:.1f} MB of history, {history.runs} run(s); "
             f"{reads} reads per route, as its owner",
             f"{'route':<26}{'replayed, median ms':>22}{'kept: first ms':>18}{'kept: rest, median ms':>24}"]
    for route in ROUTES:
        rest = cached[route][1:] or cached[route]
        lines.append(f"{'GET /sessions/{id}' + route:<26}{statistics.median(replayed[route]) * 1000:>22.1f}"
                     f"{cached[route][0] * 1000:>18.1f}{statistics.median(rest) * 1000:>24.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--reads", type=int, default=10)
    args = parser.parse_args()
    print(asyncio.run(bench(args.steps, args.reads)))


if __name__ == "__main__":
    main()
