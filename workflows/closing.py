"""How a session ends: every open call settled, the transcript left well-formed, in-flight work finished.

A session closes when it has been idle too long, when a person cancels it, or
when Temporal cancels it; in each case what still waits is settled as
cancelled and every unanswered call gets a result, so even a closed
transcript is one a model could read.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from workflows.recorder import Recorder
from workflows.session_run import SessionRun
from workflows.waiting import Waiting

# After a person's cancel the session closes this much later, from its own timer (see
# let_in_flight_work_finish).
CANCEL_GRACE = timedelta(seconds=1)


class Closing:
    """A part of AgentWorkflow: called when its loop ends, however it ends."""

    def __init__(self, session: SessionRun, waiting: Waiting, recorder: Recorder) -> None:
        self.session = session
        self.waiting = waiting
        self.recorder = recorder

    async def let_in_flight_work_finish(self) -> None:
        """Update handlers still replying, and notifications still being sent, finish before the
        run ends. An activity that completes while the closing task is in flight makes Temporal
        fail that task (UnhandledCommand), which aborts any Update it carried: a person's cancel
        would come back as an error.

        After a person's cancel the session closes a moment later, in a task its own timer
        starts: what a client sends right after its cancel (an `approve`) arrives while the
        cancel's task is in flight, and a closing completion that races a signal is failed by
        the server (UNHANDLED_COMMAND) and retried, a failed task operators are paged for.
        Arriving first, the signal is refused and audited like any other."""
        if self.session.run_state.cancel_reason is not None:
            await workflow.sleep(CANCEL_GRACE)
        # Signals to other sessions of a delegation tree too (only sessions since SUB_AGENTS send any).
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and not self.session.notifications_in_flight
                                      and not self.session.reports_in_flight)

    def close(self, reason: str) -> None:
        """Settle whatever is still open, so even a closed transcript is well-formed."""
        why = f"The session closed ({reason}) before this call was settled"
        self.waiting.settle_all("cancelled", why)
        for call_id in self.session.conversation.unanswered_call_ids():
            self.session.add_tool_result(call_id, f"{why}; the tool did not run.")
        self.session.closed_reason = reason
        self.recorder.set_state("closed")
