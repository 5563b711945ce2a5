"""When a run hands over to the next (continue-as-new), and how; what crosses is workflows/handover.py.

A session hands over between turns, at a step boundary inside a long turn, or
while it waits for people: wherever it is, once its history outgrows its
budget. Handlers and notifications still in flight finish first, and a state
too big to carry next to what waits for people waits for those pauses instead.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError

from workflows.activity_calls import LocalChecks, failure_message
from workflows.contract import RECORD_TRANSCRIPT_INDEX
from workflows.handover import DECIDED_KEPT, HISTORY_BYTES_LIMIT, RunState, newest, shrink_to_fit
from workflows.transcript_index import transcript_index
from workflows.session_run import SessionRun

# Bounded, like the timer it replaced: a run that hands over is one whose history is large, and
# signals may keep coming while it waits. Past 5 s in the queue (every activity slot busy with
# model and tool calls), or three failed attempts (a worker of the version before, in a rolling
# deploy, lacks the activity), the run hands over without an index (read by queries instead).
RECORD_INDEX_CALL: dict[str, Any] = dict(
    schedule_to_start_timeout=timedelta(seconds=5),
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=3, maximum_interval=timedelta(seconds=2)),
)


class Continuing:
    """A part of AgentWorkflow: the loop asks `hand_over_if_long` at its boundaries; __init__ calls `resume`."""

    def __init__(self, session: SessionRun, checks: LocalChecks) -> None:
        self.session = session
        self.checks = checks

    def history_is_long(self) -> bool:
        """Time to continue as new: past the session's event budget or HISTORY_BYTES_LIMIT.

        Sessions follow their own budgets rather than the server's early suggestion
        (about 4 MB): each hand-over carries the model's recent view, so fewer, larger
        runs store less in all.
        """
        history = self.checks.history_reading()
        if history.length >= self.session.config.continue_as_new_after_events:
            return True
        return history.size >= HISTORY_BYTES_LIMIT

    def should_hand_over(self) -> bool:
        """Wake a wait to hand over."""
        # Not while a tool call waits for its server's question to be answered: the call is in no RunState.
        return not self.session.hand_over_blocked and not self.session.tool_inputs_waiting and self.history_is_long()

    async def hand_over_if_long(self) -> None:
        if self.should_hand_over():
            await self.hand_over()

    async def hand_over(self) -> None:
        """Continue as new with everything the next run needs; raises ContinueAsNewError.

        Handlers and notifications still in flight finish first: Temporal
        drops an activity's result once its run has ended.

        The run continues as new in the task its transcript index's activity completes in. A
        local activity's result can come in an activation of its own, with the signals of the same
        workflow task in the next one: a run that continued as new on the result alone had chosen
        what to carry before those signals were handled, and they were lost to the next run (a
        replay after a failed task reproduces that split). An ordinary activity's completion is an
        event, given in one activation with every signal of its task, and those are handled before
        the loop resumes. It is dispatched at once: a timer (as runs before did) fires no sooner
        than the server's timer queue next reads, about a second away, and a second of 1.9 MB
        signals took a run past Temporal's 50 MB limit.
        """
        self.session.handing_over = True  # Updates waiting for the session to settle answer now
        carried = await self.carry_once_settled()
        if carried is not None:
            await self.record_transcript_index()
            carried = await self.carry_once_settled()  # with the signals that came meanwhile
        if carried is None:
            workflow.logger.warning("too much waits for people to hand over now; trying again once it settles")
            self.session.hand_over_blocked = True
            self.session.handing_over = False
            return
        workflow.continue_as_new(self.session.config.model_copy(update={"carried": carried.model_dump(mode="json")}))

    async def carry_once_settled(self) -> RunState | None:
        """What to carry once handlers and notifications in flight have finished; None when it does not fit.

        After the index's activity nothing it waits for may be a local activity (notifications are
        ordinary activities, handlers await none): a local activity's result could come alone again.
        """
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and not self.session.notifications_in_flight)
        return shrink_to_fit(self.carry(), self.session.conversation)

    async def record_transcript_index(self) -> None:
        """This run's transcript by reference, recorded once in its history as an activity's input,
        so that it can be read back without a replay once the run has ended
        (workflows/transcript_index.py). Awaited even when the run has no index: its completion
        is the task the run hands over in. Its result is not read (anyone who reaches the
        frontend may complete it), and a failure only leaves the transcript to be read by queries."""
        index = transcript_index(self.session.run_state.first_message_index, self.session.conversation.messages)
        try:
            await self.checks.activity_outcome(workflow.execute_activity(
                RECORD_TRANSCRIPT_INDEX.name, index, result_type=RawValue, summary="the transcript index of this run",
                **RECORD_INDEX_CALL,
            ))
        except ActivityError as error:
            workflow.logger.warning("the transcript index was not recorded: %s", failure_message(error))

    def carry(self) -> RunState:
        pauses = self.session.run_state.pauses
        pauses.decided = dict(newest(list(pauses.decided.items()), DECIDED_KEPT))
        return self.session.run_state.for_next_run(workflow.now())

    def resume(self, carried: RunState) -> None:
        """Take over the state the previous run handed over, its messages appended one by one so
        the conversation's invariant and the hash chain hold for them as for any other."""
        messages, carried.messages = carried.messages, []
        if "verifier" not in carried.model_fields_set:  # a state written before verified decisions
            carried.verifier = self.session.run_state.verifier
        self.session.run_state = carried
        for message in messages:
            self.session.append(message)
        self.session.settled_event = carried.events.last_id
        if carried.pauses.is_waiting():
            self.session.state = "awaiting_human"
        elif carried.in_turn or carried.inbox:
            self.session.state = "running"
        else:
            self.session.state = "idle"
