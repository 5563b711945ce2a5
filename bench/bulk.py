"""What deciding many calls at once costs: one `POST /decisions` against as many single decisions.

    python -m bench.bulk [--calls 1000] [--per-session 10] [--in-flight 8]

On its own dev server, worker (the scripted model asks `per-session` approvals
in one reply) and HTTP API, as their owner: `calls` pending calls decided as
single API decisions (`POST /sessions/{id}/calls/{call}/approve`, `in-flight`
requests at a time, the bulk route's own concurrency), then another `calls`
decided in one `POST /decisions`. Each decision is the same work either way
(access check, proof, the session's Update); the ratio says what one request
per decision adds. Both sets are started and listed before either is timed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from typing import Any

import httpx2 as httpx

from bench.own_server import own_dev_server, served
from hitl.api.app import create_app
from hitl.api.auth import TokenBook
from hitl.testing import scripted_model
from hitl.worker import build_worker

TOKEN = "bench-token-0123456789abcdef"


def script(per_session: int) -> list[dict[str, Any]]:
    emails = [{"call": "send_email", "args": {"to": f"c{n}@example.com", "subject": "refund", "body": "on its way"}}
              for n in range(per_session)]
    return [{"calls": emails} if per_session > 1 else emails[0], {"say": "Done."}]


async def pending_calls(http: httpx.AsyncClient, sessions: int, per_session: int) -> list[dict[str, Any]]:
    """`sessions` sessions started and paused; their open calls as rows to decide."""
    gate = asyncio.Semaphore(8)

    async def one() -> list[dict[str, Any]]:
        async with gate:
            answer = await http.post("/sessions", json={"message": "send the refund notes",
                                                        "session_id": f"bulk-{uuid.uuid4().hex[:12]}"})
        assert answer.status_code == 201, answer.text
        started = answer.json()
        assert len(started["pending"]) == per_session, started
        return [{"session_id": started["session_id"], "call_id": item["call_id"], "args_sha256": item["args_sha256"],
                 "decision": "approve"} for item in started["pending"]]
    return [row for rows in await asyncio.gather(*(one() for _ in range(sessions))) for row in rows]


async def singles(http: httpx.AsyncClient, rows: list[dict[str, Any]], in_flight: int) -> float:
    gate = asyncio.Semaphore(in_flight)

    async def one(row: dict[str, Any]) -> None:
        async with gate:
            answer = await http.post(f"/sessions/{row['session_id']}/calls/{row['call_id']}/approve",
                                     json={"expected_args_sha256": row["args_sha256"]})
        assert answer.status_code == 200, answer.text
    began = time.perf_counter()
    await asyncio.gather(*(one(row) for row in rows))
    return time.perf_counter() - began


async def in_bulk(http: httpx.AsyncClient, rows: list[dict[str, Any]]) -> float:
    began = time.perf_counter()
    answer = await http.post("/decisions", json={"decisions": rows})
    seconds = time.perf_counter() - began
    assert answer.status_code == 200, answer.text
    refused = [row for row in answer.json() if row["outcome"] != "decided"]
    assert not refused, refused[:3]
    return seconds


async def bench(calls: int, per_session: int, in_flight: int) -> str:
    async with own_dev_server() as (client, _, folder):
        task_queue = f"bench-bulk-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, task_queue, scripted_model(script(per_session)), folder / "workspace"):
            os.environ["HITL_API_SESSIONS_PER_PERSON"] = str(2 * calls)  # one person owns every session here
            app = create_app(client=client, task_queue=task_queue, tokens=TokenBook({TOKEN: "ana"}, "bench"), policy=None)
            async with served(app) as base_url, httpx.AsyncClient(
                    base_url=base_url, timeout=1800, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                sessions = -(-calls // per_session)
                one_by_one = (await pending_calls(http, sessions, per_session))[:calls]
                together = (await pending_calls(http, sessions, per_session))[:calls]
                single_seconds = await singles(http, one_by_one, in_flight)
                bulk_seconds = await in_bulk(http, together)
    return "\n".join([
        f"{calls} calls, {per_session} per session, verified decisions, as their owner",
        f"single API decisions ({in_flight} in flight): {single_seconds:.1f} s ({single_seconds / calls * 1000:.1f} ms a call)",
        f"one POST /decisions:                   {bulk_seconds:.1f} s ({bulk_seconds / calls * 1000:.1f} ms a call)",
        f"bulk / singles: {bulk_seconds / single_seconds:.2f}",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=8)
    args = parser.parse_args()
    print(asyncio.run(bench(args.calls, args.per_session, args.in_flight)))


if __name__ == "__main__":
    main()
