"""Every `workflow.patched` flag of the agent workflow, in one place.

A change that would make a recorded history replay differently is guarded by a
patch: histories recorded before it replay the old way, runs started since take
the new one. Each patch leaves a `core_patch` marker in every run that asks for
it, so a run started by today's code asks only for the newest patch: a history
that holds its marker was made by code that had every older patch, so all of
them are taken as given and no other marker is written (one marker a run, not
six). Runs recorded before the newest patch ask for each older one, in the
order they always did, so their markers are met where they were made.

The first supported build is the one that first wrote FIRST_SUPPORTED_BUILD's
marker at run start: every history older than it is no longer replayed, and every
patch it had is retired (its old branch deleted, its `patched` call gone, or made
`deprecate_patch` where that build wrote its marker: sdk-core fails a history whose
marker no code asks for, unless the marker was written deprecated). A build stays
supported until the next first supported build is named (docs/production.md, "The
support window"). Patch state is read one way: `self.behaviours`, decided once at
run start; a patch asked at another moment says so in its note.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

# Retired patches whose markers runs of the first supported build wrote where they met them, so
# still asked there with `deprecate_patch` (it writes the marker deprecated and returns nothing: the
# new branch is the only one). Asked where an activity's result reads as another type than its own
# (workflows/activity_calls.py, read_result and read_reply), and where a pause that channels showed
# is settled (workflows/waiting.py, notify_settled).
RESULTS_READ_AS_THEIR_TYPE = "activity-results-read-as-their-type"
SETTLED_NOTICES = "notify-settled-to-the-messages-that-showed-it"

# The first supported build wrote this marker first thing in every run; it has every patch before
# it. Runs since write it deprecated (Behaviours.at_run_start). Before it, a call's approvers were
# matched as written, and a proof carrying groups (an OpenID provider's) did not verify.
GROUPS_IN_PROOFS = "groups-in-decision-proofs"
FIRST_SUPPORTED_BUILD = GROUPS_IN_PROOFS

# Runs that offer the model a `delegate__<name>` tool for each agent of HITL_AGENTS and the
# session's `agents`, and run each such call as a child session (workflows/delegating.py). Before
# it, no session had agents and none started a child. Asked at run start.
SUB_AGENTS = "sub-agents-as-child-sessions"

# Runs that tell each child they start who asked for its task (Delegation.asked_by: the speaker
# of the turn that delegated), so a child's calls are that person's requests (four-eyes, remembered
# approvals) as the parent's own would be; and, as a child, tell their parent each decision made on
# their calls (ChildPauses.decided), which the parent's audit records with the child's session.
# Before it, a child took the root's owner (`by`) for its requester (under four-eyes, a participant
# who asked the root to delegate could approve the child's call), and the root's audit said nothing
# of its children's decisions. Asked at run start.
CHILDREN_ASKED_AND_AUDITED = "children-asked-by-the-speaker-and-audited-at-the-root"

# Runs whose `wait_until_settled` does not answer while the session is idle with a message
# queued: that message's turn is about to start, and the caller (POST .../messages with `wait`,
# A2A's message) waits for its outcome. Before it, a message sent while a turn was ending was
# answered with that turn's end (no pause, the message still queued). Asked at run start.
SETTLES_AFTER_QUEUED_MESSAGES = "wait-until-settled-after-queued-messages"

# Runs whose notifications name the session's owner and participants, so a channel shows a pause
# only to people who may see the session (activities/audience.py), and a pause that names no
# approvers reaches each of them directly. Before it, a notification named only the approvers, and
# such a pause went to a channel shared by people who may not see it. Asked at run start.
NOTICES_NAME_SESSION_PEOPLE = "notifications-name-the-session-people"

# Runs whose decision proofs must name the session's chain of runs (DecisionClaims.chain, checked
# against workflow.info().first_execution_run_id: workflows/identity.py, RunCheck), so a decision
# issued in another session under the same id (a mail link, a Slack button) is refused here even if
# the API signed it. Before it, a proof named its run and not its chain. Asked at run start.
PROOFS_NAME_THEIR_CHAIN = "decision-proofs-name-their-chain-of-runs"

# Runs where an MCP server's question asked during a call that waited for approval is decided as
# that call was: by its approvers (the session's and the operator's policy's), under its four-eyes
# rule (workflows/waiting.py, request_person; workflows/deciders.py). Before it, anyone the session
# knows of answered it, and four-eyes did not apply. Asked at run start.
SERVER_QUESTIONS_AS_THEIR_CALL = "mcp-questions-decided-as-their-call"

# Runs that hold the decisions a child reports (ChildPauses.decided) to the bounds of their own
# audit rows: each text clipped as `record` clips it, a path no deeper than delegation goes
# (workflows/delegating.py, record_below). Before it, a report forged under a child's id wrote rows
# of any size into the root's audit. Asked at run start.
CHILD_REPORTS_CLIPPED = "child-reports-clipped-in-the-root-audit"

# Runs that take a decision a stand-in made for another person (a proof naming `for`: the API
# signs one only while that person's hand-over covers the call, hitl/api/delegations.py) when both
# pass the rules of workflows/stand_ins.py, and audit both. Before it, such a proof was refused.
# Asked at run start.
STAND_INS = "decisions-by-stand-ins"

# Runs that take a claim (and its release) a stand-in made for another person, as they take the
# stand-in's decision: the claim passes the rules of workflows/stand_ins.py for both people, and
# the audit names both. Before it, a claim's `for` was not read: the stand-in was judged as
# themself, and refused. Asked at run start.
STAND_IN_CLAIMS = "claims-by-stand-ins"

# Runs that ask the worker what the start needs in one round of local activities: the session's
# facts, with the catalog's check of the rules' tool names beside it, and only when the rules name a
# tool (workflows/starting.py). Before it, the names were checked first, always, and the facts asked
# after. Asked at run start.
START_IN_ONE_ROUND = "start-checks-in-one-round"

# Runs whose first model call carries its conversation when it is small (workflows/requests.py,
# OpeningMessages), so the activity need not query the workflow for it. Before it, every call's
# input was the reference alone. The newest, asked at run start.
OPENING_CARRIED = "first-model-call-carries-its-small-conversation"

# Asked only where a tool activity ends with its MCP server's question (input_required, an
# ApplicationError of type InputRequired): since, a question pause is opened and the call is retried
# with the answer (workflows/tool_input.py); before it, the failure was the tool's error like any
# other. A run that never meets one writes no marker.
TOOL_INPUT_AS_A_PAUSE = "mcp-input-required-as-a-question-pause"

# The patches asked at run start since the first supported build, newest first, each with the
# behaviour it brought: a run that has one has every older one, and none of the newer. A run that
# has none is of the first supported build.
RUN_START_PATCHES: tuple[tuple[str, str], ...] = (
    (OPENING_CARRIED, "carries_opening"),
    (START_IN_ONE_ROUND, "starts_in_one_round"),
    (STAND_IN_CLAIMS, "takes_stand_in_claims"),
    (STAND_INS, "takes_stand_ins"),
    (SERVER_QUESTIONS_AS_THEIR_CALL, "server_questions_as_their_call"),
    (CHILD_REPORTS_CLIPPED, "clips_child_reports"),
    (PROOFS_NAME_THEIR_CHAIN, "proofs_name_their_chain"),
    (NOTICES_NAME_SESSION_PEOPLE, "notices_name_session_people"),
    (SETTLES_AFTER_QUEUED_MESSAGES, "settles_after_queued_messages"),
    (CHILDREN_ASKED_AND_AUDITED, "tree_asked_and_audited"),
    (SUB_AGENTS, "delegates_to_agents"),
)


@dataclass(frozen=True)
class Behaviours:
    """Which side of each patch this run is on, decided once as the run starts."""

    delegates_to_agents: bool = True
    tree_asked_and_audited: bool = True
    settles_after_queued_messages: bool = True
    notices_name_session_people: bool = True
    proofs_name_their_chain: bool = True
    clips_child_reports: bool = True
    server_questions_as_their_call: bool = True
    takes_stand_ins: bool = True
    takes_stand_in_claims: bool = True
    starts_in_one_round: bool = True
    carries_opening: bool = True

    @classmethod
    def before_run(cls) -> Behaviours:
        """What handlers judge by until `run` has asked the patches: the handlers of a run's first
        workflow task run before `run` does. A decision's proof is judged there as before the chain
        was named, so a run recorded before that patch (a hand-over's first task taking a decision)
        replays as it was judged; the API checks the chain of runs before it signs, so that task
        loses no check. A stand-in's decision there is refused, as before stand-ins: sent again,
        it is taken once the run has started; a stand-in's claim alike. Other flags change only what
        handlers record, not what the run commands."""
        return cls(proofs_name_their_chain=False, takes_stand_ins=False, takes_stand_in_claims=False)

    @classmethod
    def at_run_start(cls) -> Behaviours:
        """Asked before any local activity: a replay must meet the markers in the order they were made."""
        lacking: dict[str, bool] = {}
        for patch, behaviour in RUN_START_PATCHES:
            if workflow.patched(patch):
                return cls(**lacking)
            lacking[behaviour] = False
        # A history of the first supported build holds this marker here, not deprecated: sdk-core
        # fails the replay of a marker that no code asks for, unless it was written deprecated.
        workflow.deprecate_patch(FIRST_SUPPORTED_BUILD)
        return cls(**lacking)
