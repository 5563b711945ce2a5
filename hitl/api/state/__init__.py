"""What the API remembers between requests, in one place every replica can share (`HITL_API_STATE`).

Web sign-ins and sign-outs, unfinished sign-ins, used stream tickets, Slack
requests seen, used mail links and the per-person limits live behind the few
operations of `ApiState`: unset, in this process's memory (`MemoryState`: one API
process); `redis://` or `rediss://`, in Redis (`RedisState`: every replica on it
shares them, and a restart keeps them). Every entry expires with what it holds.
When the store does not answer, the operation raises `StateUnavailable` (the API
answers 503 with its one line): nothing falls back to memory.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from hitl.api.state.errors import StateConfigError, StateUnavailable
from hitl.api.state.memory import MemoryState

SETTING = "HITL_API_STATE"
__all__ = ["ApiState", "MemoryState", "StateConfigError", "StateUnavailable", "state_from_env", "state_of"]


class ApiState(Protocol):
    """Keys are short ASCII names (`kind:digest`); values are strings; times are seconds."""

    async def put(self, key: str, value: str, seconds: float) -> None:
        """Keep `value` under `key` for `seconds` (replacing what was there)."""

    async def get(self, key: str) -> str | None:
        """The live value under `key`, or None."""

    async def take(self, key: str) -> str | None:
        """The live value under `key`, deleted in the same step: of two takers, one gets it."""

    async def delete(self, key: str) -> None: ...

    async def add_once(self, key: str, seconds: float) -> bool:
        """Mark `key` as seen for `seconds`; True only for the first to mark it (a used ticket, a
        Slack request seen)."""

    async def acquire(self, key: str, limit: int, seconds: float) -> bool:
        """Count one more under `key` unless it already holds `limit`; True when counted. The count
        is forgotten `seconds` after its last acquire (a replica that died holding one)."""

    async def release(self, key: str) -> None:
        """Count one less under `key` (never below nothing)."""

    async def problem(self) -> str | None:
        """Why the store cannot be used now, or None (the health check asks)."""

    def describe(self) -> str:
        """Where the state lives, in words for the start line and the health check."""

    async def close(self) -> None: ...


def state_of(request: Any) -> ApiState:
    """The API's state, for a route (`create_app` keeps it on the app)."""
    store: ApiState = request.app.state.api_state
    return store


def state_from_env() -> ApiState:
    """The store HITL_API_STATE names: memory when unset, Redis for a redis:// or rediss:// URL."""
    url = os.environ.get(SETTING, "").strip()
    if not url:
        return MemoryState()
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise StateConfigError(f"{SETTING}={url.split('@')[-1]}: must be a redis:// or rediss:// URL (or unset: "
                               "this process's memory)")
    from hitl.api.state.redis_state import RedisState  # redis is needed only here (the `redis` extra)

    return RedisState.from_url(url)
