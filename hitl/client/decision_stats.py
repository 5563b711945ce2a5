"""How people decide: counts and times of decisions per tool, policy rule, door and person.

Pure: no I/O. The input is each session's audit (the `audit` query's rows, hitl/client/decisions.py
reads them); the output is what `GET /stats`, `starter.py stats`, the web inbox's stats page and
the API's `/metrics` show (docs/interface.md, "Decisions at scale").

What counts (docs/observability.md, "How people decide"):

- a request is an approval or a review that waited for a person (its `requested` row); a question
  is not a decision on a call and is left out;
- a decision is an `approved`, `edited`, `rejected` or `timed_out` row on such a request; a call
  that needs two approvals counts each person's approval;
- a request counts in the period its request time falls in, a decision in the one its decision
  time falls in; the seconds to decide run from the request to that decision (timeouts are no
  person's decision: they have no door, no person and no time to decide);
- the policy rule is the operator policy's `tools.<key>` the tool falls under now, else `session`
  (the session's own rules or the tool's own setting): the audit names the tool, and the policy
  says which of its keys a tool falls under;
- rows a child session reported to its parent (`session_id` set) are the child's, counted where the
  child's own audit has them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from workflows.policy import RubberStamp

DecisionOutcome = Literal["approved", "edited", "rejected", "timed_out"]
DECISION_OUTCOMES: tuple[DecisionOutcome, ...] = ("approved", "edited", "rejected", "timed_out")
DECIDED_KINDS = ("approval", "review")  # a `requested` row's `rule` says which kind of pause opened
SESSION_RULE = "session"  # no operator rule covers the tool: the session's own rules decided
NO_DOOR = "unknown"  # a decision recorded before decisions named their door
Dimension = Literal["tool", "rule", "door", "person"]
DIMENSIONS: tuple[Dimension, ...] = ("tool", "rule", "door", "person")


@dataclass(frozen=True)
class Request:
    """A call that waited for a person."""

    session_id: str
    call_id: str
    tool: str
    rule: str
    at: datetime


@dataclass(frozen=True)
class Decision:
    """One decision on a request: a person's (`person`, `door`) or the clock's (`timed_out`)."""

    session_id: str
    call_id: str
    tool: str
    rule: str
    outcome: DecisionOutcome
    at: datetime
    requested_at: datetime | None
    person: str | None = None
    door: str | None = None

    @property
    def seconds(self) -> float | None:
        """From the request to this decision; None for a timeout, or when the request is not in the audit."""
        if self.outcome == "timed_out" or self.requested_at is None:
            return None
        return max(0.0, (self.at - self.requested_at).total_seconds())


@dataclass
class DecisionRecords:
    """What one or more sessions' audits say was requested and decided."""

    requests: list[Request] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    def extend(self, other: DecisionRecords) -> None:
        self.requests.extend(other.requests)
        self.decisions.extend(other.decisions)


class AuditRow(BaseModel):
    """The fields of an audit row (workflows/session.py, AuditEvent) these figures read."""

    model_config = ConfigDict(extra="ignore")

    at: datetime
    event: str
    call_id: str | None = None
    tool: str | None = None
    by: str | None = None
    via: str | None = None
    rule: str | None = None
    session_id: str | None = None


def records_from_audit(session_id: str, rows: Iterable[Mapping[str, Any]],
                       rule_of: Callable[[str], str | None] = lambda tool: None) -> DecisionRecords:
    """The requests and decisions in one session's audit, in its order. `rule_of(tool)` names the
    operator policy's key a tool falls under (None: none). Rows that do not parse (a gap a
    retention left, `{"missing": n}`) are skipped."""
    records = DecisionRecords()
    asked: dict[str, Request] = {}
    for row in parsed_rows(rows):
        if row.session_id is not None or row.call_id is None:
            continue
        if row.event == "requested" and row.rule in DECIDED_KINDS and row.tool:
            request = Request(session_id, row.call_id, row.tool, policy_rule(row.tool, rule_of), row.at)
            asked[row.call_id] = request
            records.requests.append(request)
        elif row.event in DECISION_OUTCOMES and row.call_id in asked:
            request = asked[row.call_id]
            person = row.by if row.event != "timed_out" else None
            door = (row.via or NO_DOOR) if row.event != "timed_out" else None
            records.decisions.append(Decision(session_id, row.call_id, request.tool, request.rule, row.event,
                                              row.at, request.at, person, door))
    return records


def parsed_rows(rows: Iterable[Mapping[str, Any]]) -> Iterable[AuditRow]:
    for raw in rows:
        try:
            yield AuditRow.model_validate(raw)
        except ValidationError:
            continue


def policy_rule(tool: str, rule_of: Callable[[str], str | None]) -> str:
    key = rule_of(tool)
    return f"tools.{key}" if key is not None else SESSION_RULE


class Figures(BaseModel):
    """One row of the stats: a tool, rule, door or person's figures over the period."""

    requested: int = 0
    approved: int = 0
    edited: int = 0
    rejected: int = 0
    timed_out: int = 0
    decide_seconds_p50: float | None = None
    decide_seconds_p95: float | None = None


class PersonFigures(Figures):
    rubber_stamp: bool = False


class Stats(BaseModel):
    """The figures over [since, until): the whole, then per tool, policy rule, door and person."""

    since: datetime | None
    until: datetime | None
    total: Figures
    tools: dict[str, Figures]
    rules: dict[str, Figures]
    doors: dict[str, Figures]
    people: dict[str, PersonFigures]
    rubber_stamp: RubberStamp


def within(at: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or at >= since) and (until is None or at < until)


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least `share` of the values at or
    below it (p50 of 1, 2, 3, 4 is 2). None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def figures_of(requested: int, decisions: list[Decision]) -> Figures:
    counts = {outcome: sum(1 for decision in decisions if decision.outcome == outcome) for outcome in DECISION_OUTCOMES}
    seconds = [s for decision in decisions if (s := decision.seconds) is not None]
    return Figures(requested=requested, **counts, decide_seconds_p50=percentile(seconds, 0.5),
                   decide_seconds_p95=percentile(seconds, 0.95))


def is_rubber_stamp(figures: Figures, thresholds: RubberStamp) -> bool:
    """Enough decisions, nearly all approved unchanged, and half of them in a few seconds or less."""
    decided = figures.approved + figures.edited + figures.rejected
    if decided < thresholds.min_decisions or figures.decide_seconds_p50 is None:
        return False
    return figures.approved / decided >= thresholds.approve_rate and figures.decide_seconds_p50 <= thresholds.median_seconds


def key_of(decision: Decision, dimension: Dimension) -> str | None:
    return {"tool": decision.tool, "rule": decision.rule, "door": decision.door, "person": decision.person}[dimension]


def compute_stats(records: DecisionRecords, since: datetime | None = None, until: datetime | None = None,
                  thresholds: RubberStamp | None = None, tool: str | None = None, person: str | None = None) -> Stats:
    """The figures of the requests and decisions in [since, until), for one tool or person if named.
    A door's or person's `requested` counts the calls they decided (each call once)."""
    thresholds = thresholds or RubberStamp()
    requests = [r for r in records.requests if within(r.at, since, until) and tool in (None, r.tool)]
    decisions = [d for d in records.decisions if within(d.at, since, until) and tool in (None, d.tool)
                 and person in (None, d.person)]
    grouped = {dimension: grouped_by(decisions, dimension) for dimension in DIMENSIONS}
    # Requests have a tool and a rule, not yet a door or a person; one person's figures count the
    # calls they decided.
    asked: dict[Dimension, dict[str, int]] = {} if person is not None else {
        "tool": count_by(requests, lambda r: r.tool), "rule": count_by(requests, lambda r: r.rule)}
    sections: dict[Dimension, dict[str, Figures]] = {}
    for dimension in DIMENSIONS:
        keys = sorted(set(grouped[dimension]) | set(asked.get(dimension, {})))
        sections[dimension] = {key: figures_of(requested_in(asked, dimension, key, grouped[dimension].get(key, [])),
                                               grouped[dimension].get(key, []))
                               for key in keys}
    people = {name: PersonFigures(**figures.model_dump(), rubber_stamp=is_rubber_stamp(figures, thresholds))
              for name, figures in sections["person"].items()}
    total_requested = len(requests) if person is None else calls_in(decisions)
    return Stats(since=since, until=until, total=figures_of(total_requested, decisions), tools=sections["tool"],
                 rules=sections["rule"], doors=sections["door"], people=people, rubber_stamp=thresholds)


def requested_in(asked: dict[Dimension, dict[str, int]], dimension: Dimension, key: str,
                 decisions: list[Decision]) -> int:
    return asked[dimension].get(key, 0) if dimension in asked else calls_in(decisions)


def grouped_by(decisions: list[Decision], dimension: Dimension) -> dict[str, list[Decision]]:
    groups: dict[str, list[Decision]] = defaultdict(list)
    for decision in decisions:
        key = key_of(decision, dimension)
        if key is not None:
            groups[key].append(decision)
    return dict(groups)


def count_by(requests: list[Request], key: Callable[[Request], str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for request in requests:
        counts[key(request)] += 1
    return dict(counts)


def calls_in(decisions: list[Decision]) -> int:
    return len({(decision.session_id, decision.call_id) for decision in decisions})
