"""The API's state in Redis (`HITL_API_STATE` set to a `redis://` or `rediss://` URL): shared by every replica.

Each operation is one command or one script, so it is atomic across replicas: a
ticket taken twice at once is taken once. Every key carries its expiry. A Redis
that does not answer raises `StateUnavailable` within `TIMEOUT_SECONDS`; the
client reconnects on the next request once it answers again.
"""

from __future__ import annotations

from typing import Any, Awaitable
from urllib.parse import urlsplit

from hitl.api.state.errors import StateUnavailable

PREFIX = "hitl:"
TIMEOUT_SECONDS = 2.0
# One more, unless `limit` are held; the count lives `seconds` past its last acquire.
ACQUIRE = """
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
if held >= tonumber(ARGV[1]) then return 0 end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
RELEASE = """
local left = tonumber(redis.call('GET', KEYS[1]) or '0') - 1
if left > 0 then redis.call('SET', KEYS[1], left, 'KEEPTTL') else redis.call('DEL', KEYS[1]) end
return left
"""


def milliseconds(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class RedisState:
    """`ApiState` on one Redis (a redis.asyncio client with short timeouts and no retries)."""

    def __init__(self, client: Any, where: str) -> None:
        self.client = client
        self.where = where
        self.acquiring = client.register_script(ACQUIRE)
        self.releasing = client.register_script(RELEASE)

    @classmethod
    def from_url(cls, url: str) -> RedisState:
        from hitl.extras import require

        require("redis", "HITL_API_STATE")
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # No retries: a Redis that is down answers a request with a 503 in TIMEOUT_SECONDS, not later.
        client = redis.asyncio.Redis.from_url(url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS,
                                              decode_responses=True, retry=Retry(NoBackoff(), 0))
        parts = urlsplit(url)
        return cls(client, f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}")

    async def answer(self, pending: Awaitable[Any]) -> Any:
        """What Redis answers; StateUnavailable (one line) when it does not."""
        import redis.exceptions

        try:
            return await pending
        except (redis.exceptions.RedisError, OSError) as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            raise StateUnavailable(f"the API's shared state (Redis at {self.where}) does not answer: {reason}") from None

    async def put(self, key: str, value: str, seconds: float) -> None:
        await self.answer(self.client.set(PREFIX + key, value, px=milliseconds(seconds)))

    async def get(self, key: str) -> str | None:
        return await self.answer(self.client.get(PREFIX + key))

    async def take(self, key: str) -> str | None:
        return await self.answer(self.client.getdel(PREFIX + key))

    async def delete(self, key: str) -> None:
        await self.answer(self.client.delete(PREFIX + key))

    async def add_once(self, key: str, seconds: float) -> bool:
        return bool(await self.answer(self.client.set(PREFIX + key, "1", px=milliseconds(seconds), nx=True)))

    async def acquire(self, key: str, limit: int, seconds: float) -> bool:
        return bool(await self.answer(self.acquiring(keys=[PREFIX + key], args=[limit, milliseconds(seconds)])))

    async def release(self, key: str) -> None:
        await self.answer(self.releasing(keys=[PREFIX + key]))

    async def problem(self) -> str | None:
        try:
            await self.answer(self.client.ping())
        except StateUnavailable as unavailable:
            return str(unavailable)
        return None

    def describe(self) -> str:
        return f"Redis at {self.where}, shared by every API replica on it (HITL_API_STATE)"

    async def close(self) -> None:
        await self.client.aclose()
