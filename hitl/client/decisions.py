"""The audits of every session active in a period: what stats and evidence over a period read.

Temporal's visibility store lists the sessions whose runs overlap the period (started before
its end, and still running or closed after its start); each one's whole audit is then read
through the `audit_page` query across its runs (hitl/client/sessions.py), closed sessions too
(a worker replays them to answer). Reads are concurrent but bounded (`concurrency` at once),
and so is the number of sessions read (`limit`): a period with more says so (`complete`
false) rather than read without end. A session whose audit cannot be read is named with why,
and the others are still read.

A row's own time (`at`) says whether it falls in the period: this module returns each
session's audit whole, so a decision can be paired with its request made before the period.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from temporalio.client import Client, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from hitl.client.decision_stats import DecisionRecords, Stats, compute_stats, records_from_audit
from hitl.client.inbox import escaped, executions
from hitl.client.sessions import read_all
from workflows.contract import AUDIT_PAGE, WORKFLOW
from workflows.policy import OperatorPolicy, RubberStamp

DEFAULT_PERIOD = timedelta(days=7)
LONGEST_PERIOD = timedelta(days=366)
# Times a visibility query names (RFC 3339, four-digit years, not before Unix time) with room for a period.
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9999, 1, 1, tzinfo=timezone.utc)
SESSIONS_READ = 2_000  # sessions one read goes through at most
CONCURRENT_READS = 8  # audits read at once (each query of a closed session replays it on a worker)


@dataclass
class PeriodAudits:
    """Each listed session's whole audit (rows as the `audit` query returns them), by session id."""

    audits: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # session id: why its audit was not read
    complete: bool = True  # false: more sessions were active than `limit`, and only `limit` were read


class PeriodError(ValueError):
    """A period that cannot be read; the message says which bound and why, in one line."""


def iso_time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 time (UTC when it names no zone); None when not given."""
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PeriodError(f"{name}: not an ISO 8601 time ({value[:40]!r}); e.g. 2026-03-01T00:00:00Z") from None
    try:
        at = (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except OverflowError:
        at = None
    if at is None or not EARLIEST <= at <= LATEST:
        raise PeriodError(f"{name}: {value[:40]!r} is out of range ({EARLIEST.year} to {LATEST.year - 1})")
    return at


def period(since: str | None, until: str | None, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The period asked for: `until` defaults to now, `since` to a week before it."""
    end = iso_time(until, "until") or now or datetime.now(timezone.utc)
    start = iso_time(since, "since") or end - DEFAULT_PERIOD
    if start >= end:
        raise PeriodError("since: must be before until")
    if end - start > LONGEST_PERIOD:
        raise PeriodError(f"since: a period is at most {LONGEST_PERIOD.days} days")
    return start, end


def moment(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def active_between(since: datetime | None, until: datetime | None, task_queue: str | None = None) -> str:
    """The visibility query for sessions with a run that overlaps [since, until)."""
    query = f'WorkflowType = "{WORKFLOW}"'
    if task_queue:
        query += f' AND TaskQueue = "{escaped(task_queue)}"'
    if until is not None:
        query += f' AND StartTime < "{moment(until)}"'
    if since is not None:
        query += f' AND (ExecutionStatus = "Running" OR CloseTime >= "{moment(since)}")'
    return query


async def sessions_active_between(client: Client, since: datetime | None, until: datetime | None, *,
                                  task_queue: str | None = None,
                                  limit: int | None = SESSIONS_READ) -> tuple[list[str], bool]:
    """The ids of sessions active in the period (each once, however many runs it had), and
    whether that is all of them (false: there were more than `limit`; None: no limit)."""
    found: dict[str, None] = {}
    async for execution in executions(client, active_between(since, until, task_queue)):
        found[execution.execution.workflow_id] = None
        if limit is not None and len(found) > limit:
            return list(found)[:limit], False
    return list(found), True


async def audit_of(client: Client, session_id: str) -> list[dict[str, Any]]:
    """One session's whole audit, across its runs."""
    return await read_all(client, session_id, AUDIT_PAGE.name, "events")


async def audits_between(client: Client, since: datetime | None, until: datetime | None, *,
                         task_queue: str | None = None, limit: int | None = SESSIONS_READ,
                         concurrency: int = CONCURRENT_READS) -> PeriodAudits:
    """The whole audit of every session active in [since, until) (at most `limit` sessions, all
    of them with None; `concurrency` read at once)."""
    sessions, complete = await sessions_active_between(client, since, until, task_queue=task_queue, limit=limit)
    result = PeriodAudits(complete=complete)
    gate = asyncio.Semaphore(concurrency)

    async def read(session_id: str) -> None:
        async with gate:
            try:
                result.audits[session_id] = await audit_of(client, session_id)
            except RPCError as error:
                result.unreadable[session_id] = error.message or type(error).__name__
            except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as error:
                result.unreadable[session_id] = str(error) or type(error).__name__

    await asyncio.gather(*(read(session_id) for session_id in sessions))
    return result


async def stats_between(client: Client, since: datetime | None, until: datetime | None, *,
                        policy: OperatorPolicy | None = None, tool: str | None = None, person: str | None = None,
                        task_queue: str | None = None, limit: int = SESSIONS_READ) -> StatsRead:
    """How people decided in [since, until) (hitl/client/decision_stats.py), from the audits of the
    sessions active then; the policy names the rules and the rubber-stamp thresholds."""
    read = await audits_between(client, since, until, task_queue=task_queue, limit=limit)
    records = DecisionRecords()
    rule_of = rule_reader(policy)
    for session_id, rows in read.audits.items():
        records.extend(records_from_audit(session_id, rows, rule_of))
    thresholds = policy.rubber_stamp if policy is not None else RubberStamp()
    stats = compute_stats(records, since, until, thresholds, tool=tool, person=person)
    return StatsRead(**stats.model_dump(), sessions=len(read.audits), complete=read.complete,
                     unreadable=sorted(read.unreadable))


def rule_reader(policy: OperatorPolicy | None) -> Callable[[str], str | None]:
    """The operator policy's key a tool falls under (none without a policy)."""
    def rule_of(tool: str) -> str | None:
        found = policy.rule_for(tool) if policy is not None else None
        return found[0] if found is not None else None
    return rule_of


class StatsRead(Stats):
    """The figures, with how many sessions they were read from and whether that is all of them."""

    sessions: int
    complete: bool
    unreadable: list[str]
