"""What waits in a session's children, as they last reported it, and a child's own report to its parent.

A child signals its parent (`child_pauses`) whenever what waits in it or below it changes;
the parent keeps the reports in its RunState (workflows/delegating.py, ChildPausesTable) and
passes the news up in its own report, so the root's `pending` lists every pause of the tree.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

from workflows.agents import REPORTED_KEPT, ChildPauses
from workflows.contract import CHILD_PAUSES
from workflows.session_run import SessionRun

# The audit events a child passes up to its parent: people's decisions on its calls.
DECISIONS = ("approved", "rejected", "answered", "edited")


class ChildReports:
    """A part of AgentWorkflow: reads the children's reports, and sends this session's own to its parent."""

    def __init__(self, session: SessionRun) -> None:
        self.session = session

    def children_pending(self) -> list[dict[str, Any]]:
        """What waits below, as the children last said; nothing once this session has closed (its
        children are cancelled with it, and settle their own calls)."""
        if self.session.state == "closed":
            return []
        return [item for report in self.session.run_state.child_pauses.values() for item in report.items]

    def report_pauses(self) -> None:
        """A child's report to its parent, when what waits in it or below it changed."""
        delegated = self.session.config.delegated
        if delegated is None or not self.session.behaviours.delegates_to_agents:
            return
        own = workflow.info().workflow_id
        items = [{**item.view(), "call_id": f"{own}/{item.call_id}", "child_call_id": item.call_id,
                  "path": delegated.path, "session_id": own} for item in self.session.run_state.pauses.open]
        items = [*items, *self.children_pending()][-REPORTED_KEPT:]
        decided = self.decisions_to_report(own, delegated.path) if self.session.behaviours.tree_asked_and_audited else []
        if items == self.session.last_report and not decided:
            return
        self.session.last_report = items
        self.session.run_state.reports_sent += 1
        report = ChildPauses(session_id=own, seq=self.session.run_state.reports_sent, items=items,
                             **({"decided": decided} if decided else {}))
        self.send_to(delegated.parent, CHILD_PAUSES.name, report.model_dump(mode="json", exclude_unset=True))

    def decisions_to_report(self, own: str, path: list[str]) -> list[dict[str, Any]]:
        """The decisions in this session's audit since its last report: its own, named with its
        session, path and the call as the root lists it; those its children reported, as they were."""
        start = max(self.session.run_state.audit_reported - self.session.run_state.first_audit_index, 0)
        new = [event for event in self.session.run_state.audit[start:] if event.event in DECISIONS]
        self.session.run_state.audit_reported = self.session.run_state.first_audit_index + len(self.session.run_state.audit)
        return [event.model_dump(mode="json") if event.session_id else
                {**event.model_dump(mode="json"), "session_id": own, "path": path, "call_id": f"{own}/{event.call_id}"}
                for event in new][-REPORTED_KEPT:]

    def send_to(self, session_id: str, signal: str, payload: Any) -> None:
        """A signal to another session of the tree; one that has closed meanwhile hears nothing.
        Each waits for the one before it: Temporal delivers signals to other workflows in no
        promised order, and a forwarded claim overtaken by its release would hold the call."""
        self.session.reports_in_flight += 1
        before = self.session.last_sent

        async def send() -> None:
            try:
                if before is not None:
                    await before  # never raises: each send ends here
                await workflow.get_external_workflow_handle(session_id).signal(signal, payload)
            except Exception:  # noqa: BLE001 (closed: nothing waits there any more)
                workflow.logger.info("signal %s to %s not delivered: it has closed", signal, session_id)
            finally:
                self.session.reports_in_flight -= 1

        self.session.last_sent = asyncio.ensure_future(send())
