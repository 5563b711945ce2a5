"""What the shared state costs a request: the same request with `HITL_API_STATE` in Redis against in memory.

    python -m bench.shared_state [--requests 2000]

One API (uvicorn on loopback, as `serve` runs it), a web sign-in kept in its
state, and `GET /auth/session` with that sign-in's cookie, `requests` times,
one after another: the request the web inbox makes most, whose one look-up of
the state (the sign-in, by the cookie's digest) is the whole of its work. Run
once with the state in this process's memory, once in a `redis-server` this
bench starts on a free loopback port. Prints the median and p95 of each and
their ratio. A request that also asks Temporal (any session route) costs
milliseconds more in both, so its ratio is nearer 1.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx2 as httpx

from bench.own_server import served
from hitl.api.app import create_app
from hitl.api.auth import TokenBook
from hitl.api.oidc import Identity, OpenIDProvider
from hitl.api.state import ApiState
from hitl.api.state.memory import MemoryState
from hitl.api.state.redis_state import RedisState
from hitl.api.web_sign_in import SESSION_COOKIE, WebSession, WebSignIn, keep_session
from hitl.devserver import free_port

COOKIE = "bench-cookie-0123456789abcdef0123456789abcdef"


def started_redis(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    server = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--bind", "127.0.0.1", "--port", str(port),
                               "--save", "", "--appendonly", "no", "--dir", str(folder)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
                probe.sendall(b"PING\r\n")
                if probe.recv(16).startswith(b"+PONG"):
                    return server, port
        except OSError:
            time.sleep(0.05)
    server.terminate()
    raise SystemExit(f"redis-server did not answer on port {port} within 20 s")


async def timed(store: ApiState, requests: int) -> list[float]:
    """Seconds per `GET /auth/session` against an API keeping its state in `store`."""
    provider = OpenIDProvider("http://127.0.0.1:9", "bench")  # never asked: the sign-in is already kept
    app = create_app(client=None, task_queue="bench", tokens=TokenBook({}, "bench"), policy=None, openid=provider,
                     web_sign_in=WebSignIn(provider, "bench"), slack_door=None, api_state=store)
    await keep_session(store, COOKIE, WebSession(Identity("ana@example.com", (), time.time() + 3600), "csrf"))
    seconds: list[float] = []
    async with served(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url, cookies={SESSION_COOKIE: COOKIE}) as http:
            for _ in range(requests // 10):  # warm up the connection and the store's
                assert (await http.get("/auth/session")).status_code == 200
            for _ in range(requests):
                began = time.perf_counter()
                answer = await http.get("/auth/session")
                seconds.append(time.perf_counter() - began)
                assert answer.status_code == 200, answer.text
    return seconds


def summary(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95)] * 1000


async def bench(requests: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        redis_server, port = started_redis(Path(folder))
        try:
            in_redis = RedisState.from_url(f"redis://127.0.0.1:{port}/0")
            shared = await timed(in_redis, requests)
            await in_redis.close()
        finally:
            redis_server.terminate()
            redis_server.wait(timeout=30)
    memory = await timed(MemoryState(), requests)
    (memory_median, memory_p95), (shared_median, shared_p95) = summary(memory), summary(shared)
    return "\n".join([
        f"GET /auth/session with a web sign-in's cookie, {requests} requests one after another",
        f"  memory: median {memory_median:.3f} ms, p95 {memory_p95:.3f} ms",
        f"  Redis:  median {shared_median:.3f} ms, p95 {shared_p95:.3f} ms",
        f"  ratio (Redis / memory): {shared_median / memory_median:.2f}x median, {shared_p95 / memory_p95:.2f}x p95",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    print(asyncio.run(bench(parser.parse_args().requests)))


if __name__ == "__main__":
    main()
