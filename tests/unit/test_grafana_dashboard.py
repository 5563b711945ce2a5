"""The Grafana dashboard in the repo (deploy/grafana/hitl.json) asks only for series, and labels,
that the API's `GET /metrics` exports (hitl/api/decision_metrics.py)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hitl.api.decision_metrics import DecisionMetrics
from hitl.client.decision_stats import records_from_audit

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "hitl.json"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
SERIES = re.compile(r"\bhitl_[a-z_]+\b")
GROUPED_BY = re.compile(r"\bby \(([^)]*)\)")
MATCHED = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)\s*\"")
LABEL_VALUES = re.compile(r"label_values\((hitl_[a-z_]+), *([a-z_]+)\)")


def queries(value: Any) -> Iterator[str]:
    """Every PromQL text in the dashboard: panel targets and template variables."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("expr", "definition") and isinstance(inner, str):
                yield inner
            else:
                yield from queries(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from queries(inner)


def exported() -> dict[str, set[str]]:
    """The series a scrape returns once a decision of each kind was counted, with their labels."""
    metrics = DecisionMetrics(refresh_seconds=0, clock=lambda: T0)
    at = lambda seconds: (T0 + timedelta(seconds=seconds)).isoformat()  # noqa: E731
    rows = [{"at": at(0), "event": "requested", "call_id": "c1", "tool": "delete_file", "rule": "approval"},
            {"at": at(3), "event": "approved", "call_id": "c1", "by": "bob", "via": "web"},
            {"at": at(0), "event": "requested", "call_id": "c2", "tool": "delete_file", "rule": "approval"},
            {"at": at(9), "event": "timed_out", "call_id": "c2"}]
    metrics.add(records_from_audit("s1", rows), T0, T0 + timedelta(minutes=1))
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def test_every_query_names_a_series_the_api_exports_and_groups_by_its_labels() -> None:
    series = exported()
    texts = list(queries(json.loads(DASHBOARD.read_text())))
    assert texts, "the dashboard has no queries"
    for text in texts:
        named = set(SERIES.findall(text))
        assert named, f"a query that names no hitl series: {text}"
        assert named <= set(series), f"not exported: {named - set(series)} in {text}"
        labels = set().union(*(series[name] for name in named)) | {"le"}
        for group in GROUPED_BY.findall(text):
            assert {label.strip() for label in group.split(",")} <= labels, f"grouped by a label not exported: {text}"
        assert set(MATCHED.findall(text)) <= labels, f"matches a label not exported: {text}"
        for name, label in LABEL_VALUES.findall(text):
            assert label in series[name], f"label_values of a label not exported: {text}"


def test_a_decision_counts_once_with_its_tool_rule_door_person_and_outcome() -> None:
    series = exported()
    assert series["hitl_decisions_total"] == {"tool", "rule", "door", "person", "outcome"}
    assert series["hitl_decision_requests_total"] == {"tool", "rule"}
    assert {"hitl_decide_seconds_bucket", "hitl_decide_seconds_sum", "hitl_decide_seconds_count"} <= set(series)
