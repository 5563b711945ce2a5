"""The resync rule, written once (hitl/client/events.py, gap): `starter.py watch`, the client's
follower and the API's per-connection backlog all ask it whether a follower missed events."""

from __future__ import annotations

from pathlib import Path

from hitl.client.events import RESYNC, gap

ROOT = Path(__file__).resolve().parents[2]


def test_a_follower_whose_next_event_is_still_kept_goes_on() -> None:
    assert gap(0, {"events": [], "oldest": 0, "last": 0}) is None  # a new session: nothing yet
    assert gap(40, {"oldest": 41, "last": 60}) is None  # the next one is the oldest kept
    assert gap(60, {"oldest": 41, "last": 60}) is None  # up to date


def test_a_follower_from_before_the_oldest_kept_event_resyncs_from_just_before_it() -> None:
    missed = gap(10, {"oldest": 41, "last": 60})
    assert missed is not None and missed.type == RESYNC
    assert missed.id == 40 and missed.data == {"after": 10, "oldest": 41, "last": 60}  # resuming from 40 misses nothing more


def test_a_follower_ahead_of_the_sessions_ids_resyncs_from_the_last_one() -> None:
    missed = gap(90, {"oldest": 1, "last": 12})  # a Last-Event-ID from before a reset, or another session's
    assert missed is not None and missed.type == RESYNC and missed.id == 12


def test_the_apis_stream_does_not_keep_a_copy_of_the_rule() -> None:
    """The API reads the log's bounds only through gap(): a second copy would drift from this one."""
    source = (ROOT / "hitl" / "api" / "events.py").read_text()
    assert "gap(" in source and '"oldest"' not in source and "resync(" not in source
