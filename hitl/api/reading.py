"""What reading may cost: per-person limits on reads and streams, and closed sessions read once.

A read of a session the worker no longer caches makes it replay the history
(3.5 s for 8,000 events), and a query keeps a worker's slot meanwhile. So each
person has a few reads in flight at most and a few open event streams (429
beyond, with the limit in the reason), and a closed run, which never changes,
is answered from a small LRU keyed by (session, run): a reset makes a new run,
so a new key. The counts live in the API's state (hitl/api/state/): with
`HITL_API_STATE` in Redis, every replica counts against the same limit.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
from fastapi import HTTPException

from hitl.api.state import ApiState, StateUnavailable
from hitl.api.state.memory import MemoryState
from workflows.limits import json_size

# A count is forgotten this long after the person's last take: slots a replica held when it died
# come back then. A read lasts seconds; a stream may stay open for hours.
READ_SLOT_SECONDS = 300
STREAM_SLOT_SECONDS = 3600


def setting(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value and value.strip().isdigit() and int(value) > 0 else default


@dataclass
class PerPerson:
    """At most `limit` of one kind of request in flight per person, counted in the API's state."""

    kind: str
    limit: int
    setting: str
    store: ApiState = field(default_factory=MemoryState)
    slot_seconds: float = READ_SLOT_SECONDS

    def key(self, person: str) -> str:
        return f"held:{self.setting}:{person}"

    @asynccontextmanager
    async def slot(self, person: str) -> AsyncIterator[None]:
        give_back = await self.take(person)
        try:
            yield
        finally:
            await give_back()

    async def take(self, person: str) -> Callable[[], Awaitable[None]]:
        """One slot, or 429; the answer gives it back (once, however often it is called)."""
        if not await self.store.acquire(self.key(person), self.limit, self.slot_seconds):
            raise HTTPException(429, f"{person} already has {self.limit} {self.kind} open, the most one person may "
                                     f"({self.setting}); wait for one to finish", headers={"Retry-After": "1"})
        given_back = False

        async def give_back() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                try:
                    # Shielded: a stream's slot is given back as its client goes, while the
                    # stream's task is being cancelled; a cancelled release would hold it for good.
                    with anyio.CancelScope(shield=True):
                        await self.store.release(self.key(person))
                except StateUnavailable:
                    pass  # the count is forgotten `slot_seconds` after its last take

        return give_back


@dataclass
class ClosedReads:
    """Answers about closed runs, least recently used dropped first beyond `entries` answers or
    `max_bytes` of them (as JSON); an answer larger than a quarter of that is not kept."""

    entries: int
    max_bytes: int = 64_000_000
    answers: OrderedDict[tuple[str, str, str], tuple[Any, int]] = field(default_factory=OrderedDict)
    size: int = 0
    hits: int = 0

    def get(self, key: tuple[str, str, str]) -> Any | None:
        if key in self.answers:
            self.answers.move_to_end(key)
            self.hits += 1
            return self.answers[key][0]
        return None

    def put(self, key: tuple[str, str, str], answer: Any) -> None:
        weight = json_size(answer)
        if weight > self.max_bytes // 4:
            return
        if key in self.answers:
            self.size -= self.answers.pop(key)[1]
        self.answers[key] = (answer, weight)
        self.size += weight
        while self.answers and (len(self.answers) > self.entries or self.size > self.max_bytes):
            self.size -= self.answers.popitem(last=False)[1][1]


def limits_from_env(store: ApiState | None = None) -> tuple[PerPerson, PerPerson, ClosedReads]:
    shared = store if store is not None else MemoryState()
    return (
        PerPerson("reads", setting("HITL_API_READS_PER_PERSON", 8), "HITL_API_READS_PER_PERSON", shared),
        PerPerson("event streams", setting("HITL_API_STREAMS_PER_PERSON", 10), "HITL_API_STREAMS_PER_PERSON", shared,
                  STREAM_SLOT_SECONDS),
        ClosedReads(setting("HITL_API_CLOSED_CACHE", 256), setting("HITL_API_CLOSED_CACHE_BYTES", 64_000_000)),
    )
