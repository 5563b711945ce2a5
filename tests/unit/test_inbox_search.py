"""The search for the oldest waiting sessions (hitl/client/inbox.py's `oldest_moment`), against counts
computed here: it ends where between `target` and four times as many sessions were waiting, or
within FINEST of where the count crosses `target`, whatever the moments."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hitl.client.inbox as inbox

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)


def count_of(waiting_since: list[datetime]):
    async def count(client: object, query: str) -> int:
        moment = datetime.strptime(query.rsplit('HitlWaitingSince <= "', 1)[1][:-1], "%Y-%m-%dT%H:%M:%S.%fZ")
        return sum(since <= moment.replace(tzinfo=timezone.utc) for since in waiting_since)
    return count


@settings(max_examples=300, deadline=None)
@given(ages_ms=st.lists(st.integers(min_value=0, max_value=10 ** 10), min_size=1, max_size=60),
       target=st.integers(min_value=1, max_value=20))
def test_the_search_ends_between_the_target_and_four_times_it(ages_ms: list[int], target: int) -> None:
    waiting_since = sorted(NOW - timedelta(milliseconds=age) for age in ages_ms)
    target = min(target, len(waiting_since))
    counted = count_of(waiting_since)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(inbox, "count", counted)
    try:
        moment = asyncio.run(inbox.oldest_moment(None, "q", target, NOW))  # type: ignore[arg-type]
        found = asyncio.run(counted(None, "q" + inbox.waited_by(moment)))
    finally:
        monkeypatch.undo()
    crossing = waiting_since[target - 1]  # the moment by which `target` sessions were waiting
    assert found >= target
    assert found <= 4 * target or moment - crossing <= 2 * inbox.FINEST, (found, moment - crossing)
