"""Telling people a pause needs them, and, once it is settled, how: notifications that never block the session.

Each notice is an ordinary activity (workflows/activity_calls.py, NOTIFY_CALL) started without
being awaited by the loop; `notifications_in_flight` lets the run finish them before it hands
over or closes (Temporal drops an activity's result once its run has ended).
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError

from workflows.activity_calls import NOTIFY_CALL, LocalChecks, failure_message
from workflows.contract import NOTIFY
from workflows.limits import unreadable_reason
from workflows.patches import SETTLED_NOTICES
from workflows.pauses import PendingCall, Settlement
from workflows.requests import MessageRef, Notification, NotifyReceipt, SettledNotice
from workflows.session_run import SessionRun


class Notices:
    """A part of AgentWorkflow: the notify activities for a pause, sent in the background."""

    def __init__(self, session: SessionRun, checks: LocalChecks) -> None:
        self.session = session
        self.checks = checks

    def notify(self, event: str, item: PendingCall, to: list[str] | None = None) -> None:
        """Tell people a pause needs them; a failed notification never blocks the session."""
        named = self.session.behaviours.notices_name_session_people
        info = workflow.info()
        notification = Notification(
            session_id=info.workflow_id, event=event, item=item.view(),
            to=to or item.approvers or [], at=workflow.now(), chain=info.first_execution_run_id,
            owner=self.session.config.by if named else None, participants=list(self.session.config.participants) if named else None,
        )
        call_id = item.call_id

        async def send() -> None:
            self.session.notifications_in_flight += 1
            self.session.notices_in_flight[call_id] = self.session.notices_in_flight.get(call_id, 0) + 1
            try:
                # Its result, read as untrusted (anyone who reaches the frontend may complete it):
                # at most a few messages, kept for this call alone, for its `settled` notice.
                raw = await self.checks.activity_outcome(workflow.execute_activity(
                    NOTIFY.name, notification, result_type=RawValue, summary=f"notify {', '.join(notification.to) or 'anyone'}: {event}", **NOTIFY_CALL
                ))
                self.session.run_state.pauses.show(call_id, messages_shown(raw))
            except ActivityError as error:
                workflow.logger.warning("notification failed: %s", failure_message(error))
            finally:
                self.session.notifications_in_flight -= 1
                self.session.notices_in_flight[call_id] -= 1

        asyncio.ensure_future(send())

    def notify_settled(self, settlement: Settlement) -> None:
        """Once a pause is settled, the messages that showed it say how, and who decided: after
        every notice of it still in flight has said where it was shown (a reminder's too)."""
        call_id = settlement.call_id

        async def send() -> None:
            self.session.notifications_in_flight += 1
            try:
                await workflow.wait_condition(lambda: not self.session.notices_in_flight.get(call_id))
                messages = self.session.run_state.pauses.shown.pop(call_id, [])
                if not messages:
                    return
                workflow.deprecate_patch(SETTLED_NOTICES)  # where the first supported build wrote its marker
                notification = Notification(
                    session_id=workflow.info().workflow_id, event="settled", to=[], at=settlement.at,
                    item={"call_id": call_id, "tool": settlement.tool, "kind": settlement.kind},
                    settled=SettledNotice(outcome=settlement.outcome, by=settlement.by, via=settlement.via),
                    messages=messages,
                )
                await self.checks.activity_outcome(workflow.execute_activity(
                    NOTIFY.name, notification, result_type=RawValue, summary=f"settled: {settlement.outcome}", **NOTIFY_CALL
                ))
            except ActivityError as error:
                workflow.logger.warning("settled notification failed: %s", failure_message(error))
            finally:
                self.session.notifications_in_flight -= 1

        asyncio.ensure_future(send())


def messages_shown(raw: RawValue | None) -> list[MessageRef]:
    """The messages a notify activity says it showed; nothing if its result is not a receipt."""
    if raw is None or unreadable_reason(raw.payload.metadata) is not None:
        return []
    try:
        receipt = workflow.payload_converter().from_payload(raw.payload, NotifyReceipt)
    except Exception:
        return []
    return receipt.messages if isinstance(receipt, NotifyReceipt) else []
