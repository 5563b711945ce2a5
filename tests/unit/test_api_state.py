"""The API's state in memory keeps the promises the Redis store keeps (tests/integration/
test_api_shared_state.py runs those on a real redis-server): a take is once, an add is once, a
count stops at its limit and never goes below nothing, entries expire, and what anyone may fill
is capped. HITL_API_STATE names Redis or nothing: anything else stops the server with one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from hitl.api.state import StateConfigError, state_from_env
from hitl.api.state.memory import MemoryState
from tests.support.stack import ROOT


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_each_operation_keeps_its_promise_and_entries_expire() -> None:
    clock = Clock()
    store = MemoryState(clock=clock)

    async def story() -> None:
        await store.put("web:a", "ana", 10)
        assert await store.get("web:a") == "ana"
        assert [await store.take("web:a"), await store.take("web:a")] == ["ana", None]
        assert [await store.add_once("ticket:t", 60), await store.add_once("ticket:t", 60)] == [True, False]
        assert [await store.acquire("held:x", 2, 60) for _ in range(3)] == [True, True, False]
        for _ in range(3):
            await store.release("held:x")
        assert store.held("held:x") == 0 and await store.acquire("held:x", 2, 60)
        await store.put("web:b", "bob", 10)
        clock.now += 60
        assert await store.get("web:b") is None and await store.add_once("ticket:t", 60)
        assert store.held("held:x") == 0  # a count expires after its last acquire

    asyncio.run(story())


def test_what_anyone_may_fill_is_capped_oldest_first_and_sign_ins_are_not() -> None:
    store = MemoryState({"login": 3})

    async def story() -> None:
        for n in range(5):
            await store.put(f"login:{n}", "verifier", 600)
            await store.put(f"web:{n}", "session", 600)
        assert [await store.get(f"login:{n}") for n in range(5)] == [None, None, "verifier", "verifier", "verifier"]
        assert all([await store.get(f"web:{n}") == "session" for n in range(5)])

    asyncio.run(story())


def test_hitl_api_state_names_redis_or_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HITL_API_STATE", raising=False)
    assert isinstance(state_from_env(), MemoryState)
    monkeypatch.setenv("HITL_API_STATE", "memcached://user:secret@cache:11211")
    with pytest.raises(StateConfigError) as refused:
        state_from_env()
    assert "redis://" in str(refused.value) and "secret" not in str(refused.value)
    monkeypatch.setenv("HITL_API_STATE", "redis://127.0.0.1:1/0")
    assert "Redis at redis://127.0.0.1:1" in state_from_env().describe()


def test_serve_stops_on_a_setting_that_names_no_redis_in_one_line() -> None:
    """A port nobody serves on is fine for this: the server stops at the setting, before listening."""
    refused = subprocess.run([sys.executable, "starter.py", "serve"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, env={"PATH": "", "HITL_API_STATE": "http://cache:6379", "HITL_KEYS_DIR": "/nonexistent"})
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].startswith("error: HITL_API_STATE=http://cache:6379: must be a redis://")
