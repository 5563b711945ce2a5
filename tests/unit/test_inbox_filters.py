"""The inbox's filters (hitl/client/inbox_filters.py), as `GET /inbox` and `starter.py inbox` read them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from hitl.client.inbox_filters import FilterError, argument_matches, argument_pair, filter_from_query, moment_before

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)


def row(**fields: object) -> SimpleNamespace:
    base = {"tool": "refund", "args": {"amount": 50, "to": "ana@example.com", "ok": True}, "requested_by": "ana",
            "session_id": "s1", "requested_at": NOW - timedelta(hours=3)}
    return SimpleNamespace(**{**base, **fields})


def test_an_argument_matches_as_json_or_as_text() -> None:
    args = {"amount": 50, "to": "ana@example.com", "ok": True, "tags": ["a"]}
    assert argument_matches(args, "amount", "50") and argument_matches(args, "amount", "50.0")
    assert argument_matches(args, "to", "ana@example.com") and argument_matches(args, "ok", "true")
    assert argument_matches(args, "tags", '["a"]')
    assert not argument_matches(args, "amount", "51") and not argument_matches(args, "missing", "1")
    assert not argument_matches(args, "to", '"ana@example.com"')  # a string is compared as written


def test_older_than_is_a_duration_or_a_moment() -> None:
    assert moment_before("2h", NOW) == NOW - timedelta(hours=2)
    assert moment_before("30m", NOW) == NOW - timedelta(minutes=30)
    assert moment_before("2026-12-07T09:00:00Z", NOW) == datetime(2026, 12, 7, 9, tzinfo=timezone.utc)
    assert moment_before("2026-12-07T09:00:00", NOW) == datetime(2026, 12, 7, 9, tzinfo=timezone.utc)
    with pytest.raises(FilterError, match="older_than 'soon'"):
        moment_before("soon", NOW)


def test_every_condition_must_hold() -> None:
    wanted = filter_from_query([("tool", "refund"), ("arg.amount", "50"), ("older_than", "2h"), ("claimed", "true")], NOW)
    assert wanted.keeps(row())
    assert not wanted.keeps(row(tool="delete_file"))
    assert not wanted.keeps(row(args={"amount": 60}))
    assert not wanted.keeps(row(requested_at=NOW - timedelta(minutes=5)))
    assert filter_from_query([("requested_by", "bob")], NOW).kept([row(), row(requested_by="bob")]) == [row(requested_by="bob")]
    assert filter_from_query([], NOW).kept([row()]) == [row()]


def test_an_argument_pair_needs_a_name_and_an_equals_sign() -> None:
    assert argument_pair("to=a=b") == ("to", "a=b")
    for bad in ("to", "=x"):
        with pytest.raises(FilterError, match="name=value"):
            argument_pair(bad)
