"""What reading may cost: per-person limits on reads and streams, and closed sessions read once.

A read of a session the worker no longer caches makes it replay the history
(3.5 s for 8,000 events), and a query keeps a worker's slot meanwhile. So each
person has a few reads in flight at most and a few open event streams (429
beyond, with the limit in the reason), and a closed run, which never changes,
is answered from a small LRU keyed by (session, run): a reset makes a new run,
so a new key. Limits are per API process: several replicas allow each their own.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from fastapi import HTTPException

from workflows.limits import json_size


def setting(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value and value.strip().isdigit() and int(value) > 0 else default


@dataclass
class PerPerson:
    """At most `limit` of one kind of request in flight per person."""

    kind: str
    limit: int
    setting: str
    held: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def slot(self, person: str) -> Iterator[None]:
        give_back = self.take(person)
        try:
            yield
        finally:
            give_back()

    def take(self, person: str) -> Callable[[], None]:
        """One slot, or 429; the answer gives it back (once, however often it is called)."""
        if self.held.get(person, 0) >= self.limit:
            raise HTTPException(429, f"{person} already has {self.limit} {self.kind} open, the most one person may "
                                     f"({self.setting}); wait for one to finish", headers={"Retry-After": "1"})
        self.held[person] = self.held.get(person, 0) + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                self.give_back(person)

        return give_back

    def give_back(self, person: str) -> None:
        left = self.held.get(person, 0) - 1
        if left > 0:
            self.held[person] = left
        else:
            self.held.pop(person, None)


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


def limits_from_env() -> tuple[PerPerson, PerPerson, ClosedReads]:
    return (
        PerPerson("reads", setting("HITL_API_READS_PER_PERSON", 8), "HITL_API_READS_PER_PERSON"),
        PerPerson("event streams", setting("HITL_API_STREAMS_PER_PERSON", 10), "HITL_API_STREAMS_PER_PERSON"),
        ClosedReads(setting("HITL_API_CLOSED_CACHE", 256), setting("HITL_API_CLOSED_CACHE_BYTES", 64_000_000)),
    )
