"""What an evidence bundle holds, read from Temporal: the audit of each session and, from the
history of each of its runs, what the audit does not say itself.

The audit (the `audit_page` query, across runs) says who decided what, when, through which door.
Each run's history adds, per call, what the person was shown (the pause as the session published
it in its memo for inboxes and cards: tool, arguments, why a person is needed, who may decide, how
many, four eyes, the deadline), the version of the operator's policy the worker judged the call
with (its last verdict before the pause opened), and per decision the arguments' digest the decider
saw and the digest of the proof the API signed. Histories are read with the client's data converter, so an
encrypted deployment exports the same.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from hitl.client.decisions import audit_of, audits_between
from hitl.client.run_history import LOCAL_ACTIVITY_MARKER, RPC, payloads_of, readable
from hitl.evidence.bundle import sha256_hex
from workflows.contract import ANSWER, APPROVE, JUDGE_CALLS, REJECT
from workflows.visibility import MEMO_KEY

# Decision verbs as signals and as Updates, and the audit events each may produce.
VERBS = {entry.signal.name: entry.signal.name for entry in (APPROVE, REJECT, ANSWER)}
VERBS.update({entry.update.name: entry.signal.name for entry in (APPROVE, REJECT, ANSWER)})
DECIDED_BY = {"approved": "approve", "edited": "approve", "rejected": "reject", "answered": "answer"}
# What changes on a card while it waits, not what it showed when it opened.
NOT_SHOWN = ("claimed_by", "claim_until", "votes")
CONCURRENT_SESSIONS = 8


@dataclass
class SentDecision:
    verb: str
    call_id: str | None
    by: str | None
    expected_args_sha256: str | None
    proof_sha256: str | None
    used: bool = False


@dataclass
class RunFacts:
    """What a session's histories say besides its audit."""

    shown: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> card fields
    policy: dict[str, str | None] = field(default_factory=dict)  # call id -> policy sha256
    decisions: list[SentDecision] = field(default_factory=list)

    def decision_for(self, row: dict[str, Any]) -> SentDecision | None:
        """The decision payload an audit row records: the first unused one of its verb, call and
        person. A signal the session refused is audited as `refused` and uses up its payload here,
        so that it is never taken for a later decision's."""
        verb = DECIDED_BY.get(str(row.get("event"))) or refused_verb(row)
        if verb is None:
            return None
        for sent in self.decisions:
            if (not sent.used and sent.verb == verb and sent.by == row.get("by")
                    and sent.call_id in (None, row.get("call_id"))):
                sent.used = True
                return sent
        return None


def refused_verb(row: dict[str, Any]) -> str | None:
    """The decision verb of a refused signal's audit row; None for any other row."""
    signal = row.get("signal")
    return signal if row.get("event") == "refused" and signal in DECIDED_BY.values() else None


def _marker_kind(event: HistoryEvent, client: Client) -> str | None:
    attributes = event.marker_recorded_event_attributes
    if attributes.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in attributes.details:
        return None
    try:
        marker = client.data_converter.payload_converter.from_payloads(list(attributes.details["data"].payloads))[0]
    except Exception:  # noqa: BLE001 (a marker the SDK wrote in another shape: not a verdict)
        return None
    return marker.get("activity_type") if isinstance(marker, dict) else None


def _sent(verb: str, payload: Any) -> SentDecision | None:
    if not isinstance(payload, dict):
        return None
    proof = payload.get("proof")
    return SentDecision(verb, _text(payload.get("call_id")), _text(payload.get("by")),
                        _text(payload.get("expected_args_sha256")), sha256_hex(proof) if proof is not None else None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


async def run_facts(client: Client, events: list[HistoryEvent], facts: RunFacts) -> None:
    """Add one run's cards, verdicts and decisions to `facts`. Cards and verdicts are only what
    the workflow itself recorded (its memo, its local activities' markers); decisions are what
    callers sent."""
    policy: str | None = None
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_MARKER_RECORDED and _marker_kind(event, client) == JUDGE_CALLS.name:
            judgements = await readable(client, payloads_of(event))
            if judgements and isinstance(judgements[0], dict):
                policy = _text(judgements[0].get("policy_sha256"))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
            if MEMO_KEY in fields:
                for items in await readable(client, [fields[MEMO_KEY]]):
                    for item in items if isinstance(items, list) else []:
                        call = item.get("call_id") if isinstance(item, dict) else None
                        if isinstance(call, str) and call not in facts.shown:
                            facts.shown[call] = {name: value for name, value in item.items() if name not in NOT_SHOWN}
                            facts.policy[call] = policy
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            name = event.workflow_execution_signaled_event_attributes.signal_name
            if name in VERBS:
                values = await readable(client, payloads_of(event))
                sent = _sent(VERBS[name], values[0] if values else None)
                if sent:
                    facts.decisions.append(sent)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            name = event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            if name in VERBS:
                values = await readable(client, payloads_of(event))
                sent = _sent(VERBS[name], values[0] if values else None)
                if sent:
                    facts.decisions.append(sent)


async def run_histories(client: Client, session_id: str) -> list[list[HistoryEvent]]:
    """The events of every run of the session, from the first run to the newest."""
    handle = client.get_workflow_handle(session_id)
    run_id: str | None = (await handle.describe(rpc_timeout=RPC)).run_id
    histories = []
    while run_id:
        history = await client.get_workflow_handle(session_id, run_id=run_id).fetch_history(rpc_timeout=RPC)
        histories.append(list(history.events))
        started = histories[-1][0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
    return list(reversed(histories))


async def session_facts(client: Client, session_id: str) -> RunFacts:
    """Every run of the session, from the first to the newest, read from its history."""
    facts = RunFacts()
    for events in await run_histories(client, session_id):
        await run_facts(client, events, facts)
    return facts


def started_children(histories: list[list[HistoryEvent]]) -> list[str]:
    """The sessions these runs started as children, as Temporal recorded each start."""
    children: list[str] = []
    for events in histories:
        for event in events:
            if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                child = event.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                if child not in children:
                    children.append(child)
    return children


async def audit_records(client: Client, session_id: str, rows: list[dict[str, Any]], *,
                        own_rows_only: bool = False, since: datetime | None = None,
                        until: datetime | None = None) -> list[dict[str, Any]]:
    """The session's audit rows as evidence records. `own_rows_only` leaves out what a child
    reported (its own session is exported beside it). The histories are read only when a row falls
    in the period: an idle session costs nothing besides its audit."""
    if not any(_within(row, since, until) for row in rows):
        return []
    facts = await session_facts(client, session_id)
    records = []
    for row in rows:
        reported = row.get("session_id") not in (None, session_id)
        if own_rows_only and reported:
            continue
        record = {name: value for name, value in row.items() if value is not None}
        record["session_id"] = row.get("session_id") or session_id
        call = row.get("call_id")
        if not reported and call in facts.shown:
            record["shown"] = facts.shown[call]
            record["policy_sha256"] = facts.policy.get(call)
        sent = facts.decision_for(row) if not reported else None
        if sent is not None and row.get("event") in DECIDED_BY:
            record["decision"] = {"expected_args_sha256": sent.expected_args_sha256, "proof_sha256": sent.proof_sha256}
        if _within(row, since, until):
            records.append(record)
    return records


def _within(row: dict[str, Any], since: datetime | None, until: datetime | None) -> bool:
    at = datetime.fromisoformat(str(row["at"]))
    return (since is None or at >= since) and (until is None or at < until)


async def tree_ids(client: Client, root: str) -> list[str]:
    """The root and every session below it, parents before their children. The children are the
    ones each session's own history says it started (a child that has not reported anything to its
    parent yet, or has nothing to report, is part of the tree all the same)."""
    seen, todo = [root], [root]
    while todo:
        for child in started_children(await run_histories(client, todo.pop(0))):
            if child not in seen:
                seen.append(child)
                todo.append(child)
    return seen


async def audits_in(client: Client, task_queue: str, since: datetime,
                    until: datetime | None) -> dict[str, list[dict[str, Any]]]:
    """The whole audit of every session of this deployment (its task queue) with a run open at
    some time in the period, all of them: a bundle that silently left sessions out would mislead.
    Another deployment's sessions on the same server are not ours to export."""
    read = await audits_between(client, since, until, task_queue=task_queue, limit=None,
                                concurrency=CONCURRENT_SESSIONS)
    if read.unreadable:
        session_id, why = min(read.unreadable.items())
        raise RPCError(f"session {session_id}: {why}", RPCStatusCode.UNKNOWN, b"")
    return read.audits


async def gather(client: Client, *, task_queue: str, session: str | None = None, tree: bool = False,
                 since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
    """The records of one session, of a tree, or of everything decided in a period, in order."""
    audits: dict[str, list[dict[str, Any]]] | None = None  # read in advance for a period only
    if session is not None:
        ids = await tree_ids(client, session) if tree else [session]
    else:
        assert since is not None
        audits = await audits_in(client, task_queue, since, until)
        ids = sorted(audits)
    # A child's rows reported to its parent are exported as the child's own whenever the child is
    # in scope: always in a tree, and in a period (a child is running when it reports).
    own_rows_only = tree or session is None
    limit = asyncio.Semaphore(CONCURRENT_SESSIONS)

    async def one(session_id: str) -> list[dict[str, Any]]:
        async with limit:
            try:
                rows = audits[session_id] if audits is not None else await audit_of(client, session_id)
                return await audit_records(client, session_id, rows, own_rows_only=own_rows_only, since=since, until=until)
            except RPCError as error:
                raise RPCError(f"session {session_id}: {error.message}", error.status, error.raw_grpc_status) from None

    per_session = await asyncio.gather(*(one(session_id) for session_id in ids))
    records = [record for part in per_session for record in part]
    if session is None:
        records.sort(key=lambda record: (str(record["at"]), record["session_id"]))
    return records
