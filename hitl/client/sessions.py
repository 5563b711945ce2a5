"""What a client reads about a session across all of its runs.

A long session continues as new: one workflow id, several runs. The newest
run holds the newest part of the transcript and audit; each earlier part is
read from the run that held it (`transcript_page` says which). History is
measured the same way, over every run, because that is what Temporal stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client

from hitl.client.run_history import newest_run, read_transcript
from workflows.contract import TRANSCRIPT_PAGE

RPC = timedelta(seconds=30)


class MissingItems(BaseModel):
    """In a transcript or audit read whole, where items gone with an earlier run (retention) were."""

    missing: int


@dataclass(frozen=True)
class HistoryMeasure:
    runs: int
    events: int
    bytes: int
    largest_run_events: int
    largest_run_bytes: int


async def run_ids(client: Client, session_id: str) -> list[str]:
    """Every run of a session, oldest first, by walking back from the newest."""
    newest = (await newest_run(client, session_id)).run_id
    assert newest is not None  # newest_run pins the run it found
    runs = [newest]
    while True:
        history = await client.get_workflow_handle(session_id, run_id=runs[-1]).fetch_history(rpc_timeout=RPC)
        started = history.events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            break
        runs.append(started.continued_execution_run_id)
    return list(reversed(runs))


async def measure_history(client: Client, session_id: str) -> HistoryMeasure:
    """Events and bytes (serialized events, as the server counts them) over every run."""
    sizes: list[tuple[int, int]] = []
    for run_id in await run_ids(client, session_id):
        history = await client.get_workflow_handle(session_id, run_id=run_id).fetch_history(rpc_timeout=RPC)
        sizes.append((len(history.events), sum(event.ByteSize() for event in history.events)))
    return HistoryMeasure(
        runs=len(sizes), events=sum(e for e, _ in sizes), bytes=sum(b for _, b in sizes),
        largest_run_events=max(e for e, _ in sizes), largest_run_bytes=max(b for _, b in sizes),
    )


async def read_all(client: Client, session_id: str, query: str, key: str) -> list[dict[str, Any]]:
    """A paginated query (`transcript_page`, `audit_page`) read whole, across runs. The transcript's
    earlier runs are read from their own history where they allow it (hitl/client/run_history.py)."""
    if query == TRANSCRIPT_PAGE.name:
        transcript = await read_transcript(client, session_id)
        if transcript is not None:
            return transcript
    return await read_by_queries(client, session_id, query, key)


async def read_by_queries(client: Client, session_id: str, query: str, key: str) -> list[dict[str, Any]]:
    """A paginated query read whole, asking every run: each earlier run replays to answer."""
    items: list[dict[str, Any]] = []
    handle = await newest_run(client, session_id)
    newest = await handle.query(query, {"offset": None}, rpc_timeout=RPC)
    total, offset = newest["total"], 0
    run_for: dict[str, Any] = {"run_id": None, "first": newest["first_index"], "earlier": newest["earlier_run_id"]}
    chain = [run_for]
    while offset < total:
        # The oldest run that holds `offset`: walk back along the chain as far as needed.
        while offset < chain[-1]["first"] and chain[-1]["earlier"]:
            earlier = client.get_workflow_handle(session_id, run_id=chain[-1]["earlier"])
            page = await earlier.query(query, {"offset": offset, "limit": 1}, rpc_timeout=RPC)
            chain.append({"run_id": chain[-1]["earlier"], "first": page["first_index"], "earlier": page["earlier_run_id"]})
        holder = next((run for run in chain if run["first"] <= offset), chain[-1])
        target = client.get_workflow_handle(session_id, run_id=holder["run_id"]) if holder["run_id"] else handle
        page = await target.query(query, {"offset": offset, "limit": 100_000}, rpc_timeout=RPC)
        if not page[key]:
            if page["offset"] > offset:  # gone with an earlier run (retention): say so, do not spin
                items.append({"missing": page["offset"] - offset})
                offset = page["offset"]
                continue
            break
        items.extend(page[key])
        offset = page["offset"] + len(page[key])
    return items
