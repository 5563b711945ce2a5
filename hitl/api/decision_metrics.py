"""The decisions people make, as Prometheus counters and histograms (the API's `GET /metrics`).

Counted from the sessions' audits (hitl/client/decisions.py), as `GET /stats` reads them: each
refresh reads the decisions made since the last one, up to a few seconds ago (visibility and a
session's newest rows lag its decisions by a moment), and adds them, so each decision counts
once per API process, a little after it is made. A refresh happens on a scrape, at most once
per `HITL_DECISION_METRICS_REFRESH` seconds (60); a scrape between refreshes gets the last
figures. Counters start at zero when the API starts, as Prometheus expects of counters.

Labels: `tool`, `rule` (the operator policy's `tools.<key>`, or `session`), `door`, `person`,
`outcome`. A person is a label here, unlike the worker's series: these figures are about
people, and the people who decide are a roster the operator keeps, not an open set.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from temporalio.client import Client

from hitl.client.decision_stats import DecisionRecords, records_from_audit, within
from hitl.client.decisions import audits_between, rule_reader
from workflows.policy import OperatorPolicy

DECISIONS = "hitl_decisions"  # exported as hitl_decisions_total
REQUESTS = "hitl_decision_requests"  # exported as hitl_decision_requests_total
DECIDE_SECONDS = "hitl_decide_seconds"
EXPORTED = (f"{DECISIONS}_total", f"{REQUESTS}_total", f"{DECIDE_SECONDS}_bucket", f"{DECIDE_SECONDS}_sum",
            f"{DECIDE_SECONDS}_count")
SECONDS_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 86400, 7 * 86400)
SETTLING = timedelta(seconds=5)  # a decision's row is read this long after it was made
DEFAULT_REFRESH_SECONDS = 60


def refresh_seconds_from_env() -> float:
    value = os.environ.get("HITL_DECISION_METRICS_REFRESH", "").strip()
    try:
        return max(0.0, float(value)) if value else DEFAULT_REFRESH_SECONDS
    except ValueError:
        return DEFAULT_REFRESH_SECONDS


class DecisionMetrics:
    """The API's decision series, kept in their own registry and refreshed from the audits."""

    def __init__(self, refresh_seconds: float | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.refresh_seconds = refresh_seconds_from_env() if refresh_seconds is None else refresh_seconds
        self.registry = CollectorRegistry(auto_describe=True)
        self.decisions = Counter(DECISIONS, "Decisions on calls that waited for a person, by tool, policy rule, door, "
                                 "person and outcome", ["tool", "rule", "door", "person", "outcome"], registry=self.registry)
        self.requests = Counter(REQUESTS, "Calls that waited for a person's decision, by tool and policy rule",
                                ["tool", "rule"], registry=self.registry)
        self.seconds = Histogram(DECIDE_SECONDS, "Seconds from a call's request to a person's decision, by tool, "
                                 "policy rule, door and person", ["tool", "rule", "door", "person"],
                                 buckets=SECONDS_BUCKETS, registry=self.registry)
        self.counted_until = self.clock()
        self.refreshed_at: float | None = None
        self.lock = asyncio.Lock()

    async def exposition(self, client: Client, task_queue: str, policy: OperatorPolicy | None) -> bytes:
        """The series in Prometheus' text format, refreshed first when they are due."""
        async with self.lock:
            if self.refreshed_at is None or time.monotonic() - self.refreshed_at >= self.refresh_seconds:
                await self.refresh(client, task_queue, policy)
        return generate_latest(self.registry)

    async def refresh(self, client: Client, task_queue: str, policy: OperatorPolicy | None) -> None:
        since, until = self.counted_until, self.clock() - SETTLING
        if until <= since:
            return
        read = await audits_between(client, since, until, task_queue=task_queue)
        records = DecisionRecords()
        rule_of = rule_reader(policy)
        for session_id, rows in read.audits.items():
            records.extend(records_from_audit(session_id, rows, rule_of))
        self.add(records, since, until)
        self.counted_until, self.refreshed_at = until, time.monotonic()

    def add(self, records: DecisionRecords, since: datetime, until: datetime) -> None:
        """Count what was requested and decided in [since, until)."""
        for request in records.requests:
            if within(request.at, since, until):
                self.requests.labels(tool=request.tool, rule=request.rule).inc()
        for decision in records.decisions:
            if not within(decision.at, since, until):
                continue
            door, person = decision.door or "", decision.person or ""
            self.decisions.labels(tool=decision.tool, rule=decision.rule, door=door, person=person,
                                  outcome=decision.outcome).inc()
            if (seconds := decision.seconds) is not None:
                self.seconds.labels(tool=decision.tool, rule=decision.rule, door=door, person=person).observe(seconds)
