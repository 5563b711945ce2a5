"""Every `workflow.patched` flag of the agent workflow, in one place.

A change that would make a recorded history replay differently is guarded by a
patch: histories recorded before it replay the old way, runs started since take
the new one. Each patch leaves a `core_patch` marker in every run that asks for
it, so a run started by today's code asks only for the newest patch: a history
that holds its marker was made by code that had every older patch, so all of
them are taken as given and no other marker is written (one marker a run, not
six). Runs recorded before the newest patch ask for each older one, in the
order they always did, so their markers are met where they were made.

A patch can be retired (its old branch deleted, its `patched` call made
`deprecate_patch`, then removed) once no session that started before it can
still be running or replayed: after the longest idle timeout (7 days by
default) past the deploy that introduced it, plus the retention of any
history an operator may still reset or replay. Each note says what the old
branch does.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

# Sessions recorded before this continue as new only between turns.
HAND_OVER_ANYWHERE = "continue-as-new-inside-turns-and-pauses"
# Sessions started before this publish no search attributes and know no proofs.
PUBLISH_AND_VERIFY = "search-attributes-claims-verified-decisions"
# Sessions started before this checked edited arguments against MCP schemas' regexes in the
# workflow (see hitl/catalog/schema_tools.py, without_regexes).
EDITS_WITHOUT_REGEXES = "edited-arguments-without-schema-regexes"
# Sessions started before this took the catalog's verdict from the model activity's result, which
# anyone who reaches the frontend can complete in its place.
VERDICTS_BY_LOCAL_ACTIVITY = "catalog-verdicts-by-local-activity"
# Runs that trusted the model activity's "run" for tools the local activity had judged auto-run
# in the run, arguments aside (the hole AUTHORIZATION_MODEL closes).
VERDICTS_CACHED_PER_RUN = "catalog-verdicts-cached-per-run"
# Runs that judge every reply's calls in the worker with the operator's policy, bind proofs to the
# whole decision and refuse them across a reset, remember approvals only for their requester's
# calls, and say on each pause why it waits. It implies every patch above.
AUTHORIZATION_MODEL = "operator-policy-bound-proofs-judged-calls"
# Asked when a session closes / when a waiter arrives, not at run start (their markers sit there).
CLOSE_AFTER_NOTIFICATIONS = "close-after-notifications"  # before it: closed with notifications in flight
WAITERS_BOUNDED = "wait-until-settled-bounded"  # before it: any number of wait_until_settled waited
# Asked when a run hands over: before it, a run recorded no transcript index (workflows/transcript_index.py)
# and its transcript was read back only through its queries, by replaying it.
TRANSCRIPT_INDEX = "transcript-index-at-hand-over"
# Runs that continue as new in the task of a timer of their own. Before it, a run could continue as
# new in an activation that only resolved a local activity, and signals of the same workflow task,
# handled in the next activation, were lost to the next run (workflows/continuing.py, hand_over).
# Asked at run start: it implies every patch above, those asked later too. (Asked at the
# hand-over it would be wrong in a replay: a local activity's result that a run took in the task
# after its marker's is replayed in the marker's task, before that later task's patch markers.)
HAND_OVER_IN_A_TIMER_TASK = "hand-over-in-a-timer-task"
# Runs that continue as new in the task their transcript index's activity completes (an ordinary
# activity, its index recorded as its input). Before it, the index was a local activity and the
# run waited for a 1 ms timer after it; the server fires no timer before its timer queue's next
# read, about a second away, and a flood of 1.9 MB signals meanwhile took the run past 50 MB and
# the server terminated it. Asked at run start: it implies every patch above.
HAND_OVER_AFTER_ITS_INDEX = "hand-over-after-its-index-activity"
# Runs whose decisions right after a local activity read the history's length and size as the
# activity started (workflows/activity_calls.py, history_reading). Before it, they read the task's
# own, which sdk-core can make a later task's than a replay's: the two decided differently and the
# replay failed every task. The newest, asked at run start: it implies every patch above.
HISTORY_AS_OF_LOCAL_ACTIVITY_START = "history-read-as-of-local-activity-start"
# Asked only where an activity's result reads as another type than its own, or a model reply's
# arguments parse into a lone surrogate, which only a completion from outside makes (the SDK reads
# `binary/plain` as bytes and `binary/null` as None, whatever the type asked for): before it such a
# value reached the loop and stopped the turn on an internal error; since, it is an unreadable
# result like any other (workflows/activity_calls.py, read_result and read_reply). A run that never
# meets one writes no marker.
RESULTS_READ_AS_THEIR_TYPE = "activity-results-read-as-their-type"
# Asked only where a tool activity ends with its MCP server's question (input_required, an
# ApplicationError of type InputRequired): since, a question pause is opened and the call is retried
# with the answer (workflows/tool_input.py); before it, the failure was the tool's error like any
# other. A run that never meets one writes no marker.
TOOL_INPUT_AS_A_PAUSE = "mcp-input-required-as-a-question-pause"

# Runs that take carried state only from a run the server says was this product's own (an
# AgentWorkflow on this worker's task queue that continued as new into this one), and whose
# session rules (auto_approve) never waive approval of a tool the operator's policy names
# approvers, a count, four eyes or no remembering for. Before it, any workflow that continued as
# new into AgentWorkflow could hand it forged state, and a session's auto_approve waived all but
# the policy's "always". The newest, asked at run start: it implies every patch above.
CARRIED_PROVEN_AND_POLICY_FLOOR = "carried-state-proven-policy-floor-binds-session-rules"

# Asked when a pause that channels showed is settled (their messages returned by the notify
# activity): before it, no `settled` notification was sent, and the messages kept showing the pause.
SETTLED_NOTICES = "notify-settled-to-the-messages-that-showed-it"

# Runs that let a verified decision's proof say which groups its person is in (the operator's policy
# takes groups from an OpenID provider, `groups_from_identity`), so a call naming one of them is
# theirs to decide. Before it, a call's approvers were matched as written, and a proof carrying
# groups did not verify. The newest asked at run start: it implies every run-start patch above
# (SETTLED_NOTICES is asked where a settlement is noticed, as before).
GROUPS_IN_PROOFS = "groups-in-decision-proofs"

# The patches asked at run start, newest first, each with the behaviour it brought: a run that has
# one has every older one, and none of the newer.
RUN_START_PATCHES = (
    (GROUPS_IN_PROOFS, "counts_groups_in_proofs"),
    (CARRIED_PROVEN_AND_POLICY_FLOOR, "proves_carried_state_and_binds_policy_floor"),
    (HISTORY_AS_OF_LOCAL_ACTIVITY_START, "reads_history_as_of_local_activity_start"),
    (HAND_OVER_AFTER_ITS_INDEX, "hands_over_after_its_index"),
    (HAND_OVER_IN_A_TIMER_TASK, "hands_over_in_a_timer_task"),
    (AUTHORIZATION_MODEL, "authorization_model"),
)


@dataclass(frozen=True)
class Behaviours:
    """Which side of each patch this run is on, decided once as the run starts."""

    hands_over_anywhere: bool = True
    publishes_and_verifies: bool = True
    edits_without_regexes: bool = True
    verdicts_by_local_activity: bool = True
    verdicts_cached_per_run: bool = True
    authorization_model: bool = True
    hands_over_in_a_timer_task: bool = True
    hands_over_after_its_index: bool = True
    reads_history_as_of_local_activity_start: bool = True
    proves_carried_state_and_binds_policy_floor: bool = True
    counts_groups_in_proofs: bool = True

    @classmethod
    def at_run_start(cls) -> Behaviours:
        """Asked before any local activity: a replay must meet the markers in the order they were made."""
        lacking: dict[str, bool] = {}
        for patch, behaviour in RUN_START_PATCHES:
            if workflow.patched(patch):
                return cls(**lacking)
            lacking[behaviour] = False
        return cls(
            **lacking,
            hands_over_anywhere=workflow.patched(HAND_OVER_ANYWHERE),
            publishes_and_verifies=workflow.patched(PUBLISH_AND_VERIFY),
            edits_without_regexes=workflow.patched(EDITS_WITHOUT_REGEXES),
            verdicts_by_local_activity=workflow.patched(VERDICTS_BY_LOCAL_ACTIVITY),
            verdicts_cached_per_run=workflow.patched(VERDICTS_CACHED_PER_RUN),
        )

    def closes_after_notifications(self) -> bool:
        return self.authorization_model or workflow.patched(CLOSE_AFTER_NOTIFICATIONS)

    def closes_after_a_cancel_grace(self) -> bool:
        """Runs before the newest patch closed in the task a person's cancel arrived in."""
        return self.authorization_model

    def indexes_transcript(self) -> bool:
        return self.hands_over_in_a_timer_task or workflow.patched(TRANSCRIPT_INDEX)

    def bounds_waiters(self) -> bool:
        return self.authorization_model or workflow.patched(WAITERS_BOUNDED)
