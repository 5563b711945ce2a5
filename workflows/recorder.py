"""The session's one recorder: audit trail, event stream, log lines and what inboxes read.

Every notable moment (a pause opened or settled, a refusal, a claim, a state
change) is written to up to four sinks, each for its own reader: the audit
trail (who decided what, kept), the event stream (what live clients follow,
workflows/events.py), the worker's structured log, and the search attributes,
memo and current details an operator or an inbox reads without a query
(workflows/visibility.py). Writing them here, side by side, keeps the loop
free of bookkeeping and the sinks in step.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from temporalio import workflow

from workflows.limits import clip
from workflows.pauses import Outcome, Settlement
from workflows.session import AuditEvent, AuditEventKind, SessionState
from workflows.child_reports import ChildReports
from workflows.notices import Notices
from workflows.session_run import SessionRun

SESSION_MEMO = "hitl_session"

# Each text of an audit row (who, why, the rule, a comment) is clipped to this.
AUDIT_TEXT_BYTES = 1_000
AUDIT_EVENT: dict[Outcome, AuditEventKind] = {
    "approved": "approved", "edited": "edited", "rejected": "rejected", "declined": "rejected",
    "answered": "answered", "timed_out": "timed_out", "moved_on": "cancelled", "cancelled": "cancelled",
}


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class Recorder:
    """A part of AgentWorkflow: writes what happened, reads nothing but the session's own state;
    a settlement's notice goes out through `notices`, a child's report to its parent through `reports`."""

    def __init__(self, session: SessionRun, notices: Notices, reports: ChildReports) -> None:
        self.session = session
        self.notices = notices
        self.reports = reports

    def publish_who(self) -> None:
        """Who the session belongs to, in its memo: the API decides who may read a session from
        this without a query (a query of a closed session replays its whole history)."""
        who = {"owner": self.session.config.by, "participants": self.session.config.participants,
               "verified": self.session.config.verified_decisions}
        try:
            current = workflow.memo_value(SESSION_MEMO, default=None)
        except Exception:
            current = None
        if current != who:
            workflow.upsert_memo({SESSION_MEMO: who})

    def requested_at(self, call_id: str) -> datetime:
        """When the pause for a call opened (from the audit), for the decision's log line."""
        return next((event.at for event in reversed(self.session.run_state.audit)
                     if event.event == "requested" and event.call_id == call_id), workflow.now())

    def set_state(self, state: SessionState) -> None:
        """The state, and what an operator reads in the Temporal UI: names and times, no content."""
        if state != self.session.state:
            self.session.run_state.events.add("state", workflow.now(), state=state)
            if state != "running":
                self.session.settled_event = self.session.run_state.events.last_id
        self.session.state = state
        self.publish()
        waiting = ", ".join(f"{item.kind} of {item.tool}({clip(canonical_json(item.args), 300)}) ({item.call_id})"
                            for item in self.session.run_state.pauses.open)
        detail = {
            "running": f"running turn {self.session.run_state.turn}, step {self.session.run_state.steps}",
            "awaiting_human": f"waiting for people: {waiting}",
            "idle": f"idle after turn {self.session.run_state.turn}",
            "closed": f"closed: {self.session.closed_reason}",
        }[state]
        workflow.set_current_details(detail)

    def publish(self) -> None:
        """Search attributes and memo for inboxes (workflows/visibility.py), when they change."""
        self.session.publisher.publish(self.session.state, self.session.run_state.pauses.open, workflow.now())
        self.reports.report_pauses()  # a child tells its parent (workflows/delegating.py)

    def record_settlement(self, settlement: Settlement, audit_via: str | None = None) -> None:
        """`audit_via`: the door the audit row names when the settlement does not (see inbound.apply)."""
        self.session.run_state.events.add(
            "pause_settled", settlement.at, call_id=settlement.call_id, tool=settlement.tool, outcome=settlement.outcome,
            by=settlement.by, reason=settlement.result if settlement.outcome not in ("approved", "edited") else None,
            **door(settlement.via),
        )
        workflow.logger.info("decision", extra={
            "session": workflow.info().workflow_id, "turn": self.session.run_state.turn, "step": self.session.run_state.steps,
            "call": settlement.call_id, "tool": settlement.tool, "outcome": settlement.outcome, "by": settlement.by,
            "waited_seconds": (settlement.at - self.requested_at(settlement.call_id)).total_seconds(),
        })
        self.record(
            AUDIT_EVENT[settlement.outcome], settlement.call_id, settlement.tool, settlement.args_sha256,
            by=settlement.by, for_=settlement.for_person, via=settlement.via or audit_via, comment=settlement.comment,
            rule=settlement.rule,
            reason=settlement.result if settlement.outcome not in ("approved", "edited", "answered") else None,
        )
        self.notices.notify_settled(settlement)

    def record(self, event: AuditEventKind, call_id: str | None = None, tool: str | None = None,
               sha: str | None = None, **details: Any) -> None:
        clipped: dict[str, Any] = {key: clip(value, AUDIT_TEXT_BYTES) if isinstance(value, str) else value
                                   for key, value in details.items()}
        self.session.run_state.audit.append(
            AuditEvent(at=workflow.now(), event=event, call_id=call_id, tool=tool, args_sha256=sha, **clipped)
        )


# The door the audit names for a person's decision that named none: every door of this product
# (the API and what stands on it, the CLI, the chat) has named itself since the first supported
# build, so it came straight through Temporal (the `temporal` CLI, the Temporal UI, an SDK client).
# Only the audit row says so: the decision itself, and what its proof binds, stay as sent.
STRAIGHT_THROUGH_TEMPORAL = "temporal"


def door(via: str | None) -> dict[str, str]:
    """`via` in an event only when the decision named its door: events of older decisions stay as they were."""
    return {"via": via} if via is not None else {}
