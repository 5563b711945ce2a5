"""How people decide, computed from audit rows as the `audit` query returns them: exact figures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from hitl.client.decision_stats import DecisionRecords, compute_stats, percentile, records_from_audit
from workflows.policy import PolicyError, RubberStamp, parse_policy

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def row(event: str, call: str, seconds: float, tool: str = "delete_file", **fields: Any) -> dict[str, Any]:
    """An audit row as the query gives it: every key there, null when it does not apply."""
    base = {"at": (T0 + timedelta(seconds=seconds)).isoformat(), "event": event, "call_id": call, "tool": tool,
            "args_sha256": "ab" * 32, "by": None, "via": None, "reason": None, "comment": None, "rule": None,
            "signal": None, "session_id": None, "path": None}
    return {**base, **fields}


def asked(call: str, seconds: float, tool: str = "delete_file", kind: str = "approval") -> dict[str, Any]:
    return row("requested", call, seconds, tool, by="ana", rule=kind)


def decided(event: str, call: str, seconds: float, by: str | None = None, via: str | None = "api",
            tool: str = "delete_file") -> dict[str, Any]:
    return row(event, call, seconds, tool, by=by, via=via)


def policy_rules(tool: str) -> str | None:
    return {"delete_file": "delete_*"}.get(tool)


def a_day_of_decisions() -> DecisionRecords:
    """Two sessions: bob approves twice (10 s, 30 s) and edits once (50 s) through the API, carol
    rejects once (20 s) from Slack, one call times out, one waits still, a question is answered."""
    records = records_from_audit("s1", [
        asked("c1", 0), decided("approved", "c1", 10, "bob"),
        asked("c2", 0, tool="send_email"), decided("rejected", "c2", 20, "carol", via="slack", tool="send_email"),
        asked("c3", 100), decided("edited", "c3", 150, "bob"),
        asked("q1", 100, tool="ask_user_question", kind="question"), decided("answered", "q1", 101, "ana"),
        row("auto_approved", "c4", 200, rule="the tool's own setting"),
    ], policy_rules)
    records.extend(records_from_audit("s2", [
        asked("c1", 0), decided("approved", "c1", 30, "bob", via="web"),
        asked("c2", 10), decided("timed_out", "c2", 3610),
        asked("c3", 20),
        # A child's decision as its parent's audit repeats it: counted in the child's own audit.
        {**decided("approved", "c9", 25, "dave"), "session_id": "s2/helper/1"},
    ], policy_rules))
    return records


def test_the_figures_per_tool_rule_door_and_person_are_exact() -> None:
    stats = compute_stats(a_day_of_decisions())  # decided in 10, 20, 30 and 50 s
    assert stats.total.model_dump() == {"requested": 6, "approved": 2, "edited": 1, "rejected": 1, "timed_out": 1,
                                        "decide_seconds_p50": 20.0, "decide_seconds_p95": 50.0}
    assert stats.tools["delete_file"].model_dump() == {
        "requested": 5, "approved": 2, "edited": 1, "rejected": 0, "timed_out": 1,
        "decide_seconds_p50": 30.0, "decide_seconds_p95": 50.0}
    assert stats.tools["send_email"].model_dump() == {
        "requested": 1, "approved": 0, "edited": 0, "rejected": 1, "timed_out": 0,
        "decide_seconds_p50": 20.0, "decide_seconds_p95": 20.0}
    assert set(stats.tools) == {"delete_file", "send_email"}  # no question, no auto-approval
    assert {rule: figures.requested for rule, figures in stats.rules.items()} == {"tools.delete_*": 5, "session": 1}
    assert {door: (f.requested, f.approved, f.edited, f.rejected) for door, f in stats.doors.items()} == {
        "api": (2, 1, 1, 0), "slack": (1, 0, 0, 1), "web": (1, 1, 0, 0)}
    bob = stats.people["bob"]
    assert (bob.requested, bob.approved, bob.edited, bob.rejected, bob.timed_out) == (3, 2, 1, 0, 0)
    assert (bob.decide_seconds_p50, bob.decide_seconds_p95, bob.rubber_stamp) == (30.0, 50.0, False)
    assert set(stats.people) == {"bob", "carol"}  # nobody for the timeout; dave's is the child's


def test_a_period_counts_requests_and_decisions_by_their_own_times() -> None:
    stats = compute_stats(a_day_of_decisions(), since=T0 + timedelta(seconds=15), until=T0 + timedelta(seconds=3600))
    # Requested in the period: s1's c3 (100 s), s2's c3 (20 s); decided: carol 20 s, bob 30 s and 150 s.
    assert (stats.total.requested, stats.total.approved, stats.total.edited, stats.total.rejected,
            stats.total.timed_out) == (2, 1, 1, 1, 0)


def test_one_tool_or_one_person() -> None:
    email = compute_stats(a_day_of_decisions(), tool="send_email")
    assert (email.total.requested, email.total.rejected, list(email.people)) == (1, 1, ["carol"])
    bob = compute_stats(a_day_of_decisions(), person="bob")
    assert (bob.total.requested, bob.total.approved, bob.total.edited, bob.total.rejected, bob.total.timed_out) == (3, 2, 1, 0, 0)
    assert bob.tools["delete_file"].requested == 3 and list(bob.people) == ["bob"]


def approvals(person: str, count: int, seconds_each: float, *, reject_every: int = 0) -> DecisionRecords:
    rows: list[dict[str, Any]] = []
    for n in range(count):
        start = n * 600
        rows.append(asked(f"c{n}", start))
        rejected = reject_every and n % reject_every == 0
        rows.append(decided("rejected" if rejected else "approved", f"c{n}", start + seconds_each, person))
    return records_from_audit(f"session-of-{person}", rows)


def test_the_rubber_stamp_flag_raises_on_thirty_approvals_in_two_seconds_each_and_not_on_a_reader() -> None:
    records = approvals("rita", 30, 2)
    records.extend(approvals("rhea", 30, 95))  # reads each call before approving it
    records.extend(approvals("nina", 30, 2, reject_every=5))  # fast, and rejects one in five
    records.extend(approvals("fred", 19, 1))  # fast, but too few to tell
    people = compute_stats(records).people
    assert people["rita"].rubber_stamp is True
    assert (people["rita"].approved, people["rita"].decide_seconds_p50) == (30, 2.0)
    assert people["rhea"].rubber_stamp is False
    assert people["nina"].rubber_stamp is False
    assert people["fred"].rubber_stamp is False
    strict = compute_stats(records, thresholds=RubberStamp(min_decisions=10, approve_rate=0.8, median_seconds=120)).people
    assert (strict["rhea"].rubber_stamp, strict["nina"].rubber_stamp, strict["fred"].rubber_stamp) == (True, True, True)


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([4, 1, 3, 2], 0.5) == 2
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95
    assert percentile([7.5], 0.95) == 7.5
    assert percentile([], 0.5) is None


def test_the_policy_carries_rubber_stamp_thresholds_and_refuses_bad_ones() -> None:
    assert parse_policy("{}").rubber_stamp == RubberStamp(min_decisions=20, approve_rate=0.95, median_seconds=10)
    assert parse_policy('{"rubber_stamp": {"min_decisions": 5}}').rubber_stamp.min_decisions == 5
    for bad, says in [('{"rubber_stamp": {"approve_rate": 1.5}}', "rubber_stamp.approve_rate"),
                      ('{"rubber_stamp": {"min_decisions": 0}}', "rubber_stamp.min_decisions"),
                      ('{"rubber_stamp": {"median": 3}}', "rubber_stamp.median")]:
        with pytest.raises(PolicyError) as refused:
            parse_policy(bad)
        assert says in str(refused.value) and "\n" not in str(refused.value)


def test_rows_that_do_not_parse_are_skipped() -> None:
    records = records_from_audit("s", [{"missing": 3}, asked("c1", 0), decided("approved", "c1", 4, "bob")])
    assert compute_stats(records).total.approved == 1
