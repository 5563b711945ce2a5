"""The API's state in this process's memory (`HITL_API_STATE` unset): one API process."""

from __future__ import annotations

import time
from typing import Callable

# Past this many entries of one kind (the part of a key before its first ':'), the expired ones are
# dropped and then, if need be, the oldest: anyone may start a sign-in or send a Slack request, so
# what they leave behind may not fill the process's memory. Sign-ins and counters are not capped:
# dropping one would sign a person out or forget a held slot.
DEFAULT_CAPS = {"login": 10_000, "slack": 100_000, "ticket": 100_000, "mail": 100_000}


class MemoryState:
    """`ApiState` in a dict per kind of key: each entry is (value, expiry on `clock`)."""

    def __init__(self, caps: dict[str, int] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.caps = {**DEFAULT_CAPS, **(caps or {})}
        self.clock = clock
        self.kinds: dict[str, dict[str, tuple[str, float]]] = {}

    def entries(self, key: str) -> dict[str, tuple[str, float]]:
        return self.kinds.setdefault(key.split(":", 1)[0], {})

    def live(self, key: str) -> str | None:
        entry = self.entries(key).get(key)
        if entry is None:
            return None
        if entry[1] <= self.clock():
            del self.entries(key)[key]
            return None
        return entry[0]

    def keep(self, key: str, value: str, seconds: float) -> None:
        entries = self.entries(key)
        entries.pop(key, None)
        cap = self.caps.get(key.split(":", 1)[0])
        if cap is not None and len(entries) >= cap:
            now = self.clock()
            for expired in [known for known, (_, until) in entries.items() if until <= now]:
                del entries[expired]
            while len(entries) >= cap:
                del entries[next(iter(entries))]
        entries[key] = (value, self.clock() + seconds)

    async def put(self, key: str, value: str, seconds: float) -> None:
        self.keep(key, value, seconds)

    async def get(self, key: str) -> str | None:
        return self.live(key)

    async def take(self, key: str) -> str | None:
        value = self.live(key)
        self.entries(key).pop(key, None)
        return value

    async def delete(self, key: str) -> None:
        self.entries(key).pop(key, None)

    async def add_once(self, key: str, seconds: float) -> bool:
        if self.live(key) is not None:
            return False
        self.keep(key, "1", seconds)
        return True

    async def acquire(self, key: str, limit: int, seconds: float) -> bool:
        held = int(self.live(key) or 0)
        if held >= limit:
            return False
        self.keep(key, str(held + 1), seconds)
        return True

    async def release(self, key: str) -> None:
        entry = self.entries(key).get(key)
        if entry is None:
            return
        left = int(entry[0]) - 1
        if left > 0:
            self.entries(key)[key] = (str(left), entry[1])
        else:
            del self.entries(key)[key]

    def held(self, key: str) -> int:
        """How many a counter holds now (for tests and operators)."""
        return int(self.live(key) or 0)

    async def problem(self) -> str | None:
        return None

    def describe(self) -> str:
        return "this process's memory (one API process; HITL_API_STATE unset)"

    async def close(self) -> None:
        return None
