"""Running sessions must keep replaying: recorded histories go through `Replayer`.

tests/histories holds the history of every run of every session the test
scenarios below made, recorded with `HITL_RECORD_HISTORIES=tests/histories ./test.sh`
(files are `<test>--<workflow id>--<run id>.json`; a session that continued as
new has one file per run). A change to the workflow that would break a session
paused in production fails here; guard intended changes with a patch (workflows/patches.py).

The corpus holds histories of supported builds only: each run begins with the marker of
FIRST_SUPPORTED_BUILD or of a run-start patch newer than it. Histories of older builds are
deleted when a new first supported build is named (docs/production.md, "The support window").
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from tests.support import example_tools  # noqa: F401  (the corpus was recorded with these tools registered)
from tests.support.sessions import Agent, eventually, parse_history_file_name, pending_items, query, settled
from tests.support.replaying import worker_replayer
from workflows.patches import FIRST_SUPPORTED_BUILD, RUN_START_PATCHES

CORPUS = Path(__file__).resolve().parents[1] / "histories"
RERECORD = "re-record with `HITL_RECORD_HISTORIES=tests/histories ./test.sh`"
# The first supported build wrote this marker (not deprecated) first thing in every run: the sso
# merge, 3e5ace7. Every patch before it is retired, with the histories of the builds that lacked it.
FIRST_SUPPORTED_MARKER = FIRST_SUPPORTED_BUILD  # "groups-in-decision-proofs"

# The scenarios the corpus must hold, by the test that records them.
EXPECTED_SCENARIOS = {
    "test_seed_flows.py": [
        "test_delete_approved_runs_the_tool",
        "test_delete_rejected_with_reason_keeps_the_file",
        "test_flight_asks_then_needs_approval_then_books_once",
    ],
    "test_review_and_rules.py": [
        "test_a_reviewed_result_reaches_the_model_only_after_approval",
        "test_a_reviewer_can_replace_the_result",
        "test_a_rejected_result_tells_the_model_why",
        "test_only_listed_approvers_may_decide",
        "test_a_wildcard_approver_list_covers_every_tool",
        "test_two_distinct_approvals_are_needed_and_one_rejection_rejects",
        "test_four_eyes_keeps_the_requester_from_approving",
        "test_a_decision_on_stale_arguments_is_refused",
        "test_a_remembered_approval_covers_later_calls_of_the_tool",
        "test_a_same_args_memory_does_not_cover_other_args_and_expires",
        "test_session_policies_override_the_tools_own_flags",
        "test_the_audit_lists_every_request_and_decision_in_order",
    ],
    "test_memory_and_queue.py": [
        "test_a_same_args_memory_approves_the_same_call_again_but_not_other_args",
        "test_a_message_queued_at_the_hand_over_to_a_new_run_is_answered",
    ],
    "test_continue_as_new.py": [
        "test_a_session_continues_as_new_and_keeps_transcript_audit_and_memory",
    ],
    "test_durability.py": [
        "test_a_decision_sent_while_no_worker_runs_is_taken_by_the_next_worker",
        "test_a_paused_session_survives_a_server_restart_on_its_sqlite_file",
    ],
    "test_fault_drill.py": [
        "test_sessions_survive_killed_workers_and_a_killed_server",
    ],
    "test_recovery.py": [
        "test_a_message_while_a_call_is_pending_settles_it_first",
        "test_steering_joins_the_running_turn_at_the_next_step",
        "test_cancel_settles_every_pending_call_and_closes",
        "test_cancel_does_not_wait_for_a_slow_model",
        "test_cancelling_the_workflow_through_temporal_leaves_a_well_formed_transcript",
        "test_two_approved_calls_of_one_step_run_concurrently",
    ],
    "test_escalation_and_interrupts.py": [
        "test_a_pause_notifies_reminds_escalates_and_finally_times_out",
        "test_the_lead_can_approve_once_escalated",
        "test_an_unreviewed_result_is_withheld_after_the_timeout",
        "test_an_interrupting_message_cancels_the_model_call_and_replans",
        "test_without_interrupt_a_message_waits_for_the_step_boundary",
    ],
    "test_timeouts.py": [
        "test_an_approval_nobody_gives_times_out_after_a_day",
        "test_an_unanswered_question_times_out_with_its_own_timeout",
        "test_an_idle_session_closes_after_its_idle_timeout",
    ],
    "test_openai_path.py": [
        "test_tool_call_approved_then_answer",
        "test_the_key_never_enters_history",
        "test_429_is_retried_after_retry_after_then_succeeds",
        "test_401_fails_the_turn_at_once_but_keeps_the_session",
        "test_broken_arguments_and_unknown_tools_become_tool_errors",
        "test_repeated_call_ids_from_a_model_are_made_unique",
        "test_retry_after_sets_the_next_attempt",
    ],
    "test_bad_input.py": [
        "test_decisions_that_match_nothing_are_refused_and_change_nothing",
        "test_edited_args_are_validated_and_the_model_is_told",
        "test_two_pending_calls_need_a_call_id",
        "test_answers_outside_the_choices_are_refused",
        "test_a_form_answer_is_checked_field_by_field",
        "test_paths_that_leave_the_workspace_are_refused_to_the_model",
        "test_invalid_session_input_fails_the_start_clearly",
    ],
    "test_bad_input_catalogue.py": [
        "test_a_bad_decision_is_refused_by_signal_and_update_alike",
        "test_decisions_after_settling_are_refused",
        "test_a_bad_model_reply_never_strands_the_session",
        "test_a_failing_tool_is_reported_to_the_model",
    ],
    "test_tool_safety.py": [
        "test_links_in_the_workspace_never_lead_a_tool_outside",
        "test_an_edited_approval_cannot_touch_the_products_own_files",
    ],
    "test_user_tools.py": [
        "test_an_approval_predicate_decides_per_call",
        "test_tool_failures_are_retried_then_reported_to_the_model",
    ],
    "test_cli.py": [
        "test_the_temporal_cli_alone_drives_a_session",
        "test_starter_commands_cover_a_whole_session",
        "test_the_chat_decides_and_reattaches",
        "test_the_chat_renders_a_form_field_by_field",
    ],
    # The README's temporal-CLI blocks are left out: their sessions are found through a
    # visibility query that can lag behind the test, and the same flows are recorded above.
    "test_readme_commands.py": [
        "test_readme_block_works_as_printed",
    ],
    "test_replay.py": [
        "test_a_session_run_just_now_replays",
    ],
    # Judged calls, the operator's policy, bound proofs and pinned definitions. A reset run is not
    # kept: the Replayer runs a history under its start event's run id, which for a reset run is
    # the run it was reset from; test_authorization.py resets a reset run to replay one for real.
    "test_authorization.py": [
        "test_a_forged_model_reply_cannot_ride_the_verdict_on_a_smaller_call",
        "test_after_a_reset_an_old_proof_is_no_decision_and_cannot_be_extended",
        "test_a_remembered_approval_covers_only_the_requests_of_the_person_it_was_given_for",
        "test_session_input_cannot_loosen_the_operators_policy",
        "test_the_policy_asks_its_approvers_and_forbids_remembering",
        "test_untrusted_output_makes_outbound_tools_ask",
        "test_a_tool_that_needed_approval_keeps_asking_when_its_server_redefines_it",
        "test_a_new_run_records_one_patch_marker_not_one_per_patch",
    ],
    "test_authorization_review.py": [
        "test_an_escalation_adds_only_people_the_policy_lets_decide",
        "test_a_remembered_approval_does_not_cover_a_call_someone_else_also_led_to",
        "test_untrusted_output_is_not_forgotten_after_fifty_other_tools",
    ],
    "test_mcp_trust.py": [
        "test_a_rug_pull_does_not_let_a_tool_that_asked_run_unasked",
        "test_an_untrusted_servers_hints_are_shown_never_obeyed",
    ],
}
# Scenarios whose sessions continued as new: the corpus must hold a session's runs before and after.
CONTINUED_AS_NEW = [
    "test_a_session_continues_as_new_and_keeps_transcript_audit_and_memory",
    "test_a_message_queued_at_the_hand_over_to_a_new_run_is_answered",
]


def corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.json"))


@pytest.mark.parametrize("path", corpus(), ids=lambda p: p.stem[:80])
async def test_recorded_history_replays(path: Path) -> None:
    _, workflow_id, _ = parse_history_file_name(path)
    history = WorkflowHistory.from_json(workflow_id, path.read_text())
    await worker_replayer().replay_workflow(history)


def first_patch_marker(history: WorkflowHistory) -> str | None:
    for event in history.events:
        if event.HasField("marker_recorded_event_attributes") and event.marker_recorded_event_attributes.marker_name == "core_patch":
            [data] = event.marker_recorded_event_attributes.details.values()  # sdk-core's "patch-data"
            return str(json.loads(data.payloads[0].data)["id"])
    return None


def test_every_history_is_of_a_supported_build() -> None:
    """A run that started begins with the first supported build's marker or a newer run-start patch's;
    a history of an older build is no longer replayed and has no place here."""
    supported = {FIRST_SUPPORTED_MARKER, *(patch for patch, _ in RUN_START_PATCHES)}
    older = []
    for path in corpus():
        _, workflow_id, _ = parse_history_file_name(path)
        history = WorkflowHistory.from_json(workflow_id, path.read_text())
        started = any(event.HasField("workflow_task_completed_event_attributes") for event in history.events)
        first = first_patch_marker(history)
        if started and first not in supported and not invalid_input(history):
            older.append(f"{path.name}: {first}")
    assert not older, f"{len(older)} histories of builds before {FIRST_SUPPORTED_MARKER}:\n  " + "\n  ".join(older[:10])


def invalid_input(history: WorkflowHistory) -> bool:
    """A run refused as it starts (invalid session input) asks for no patch."""
    last = history.events[-1]
    return (last.HasField("workflow_execution_failed_event_attributes")
            and last.workflow_execution_failed_event_attributes.failure.application_failure_info.type == "InvalidSessionInput")


def test_the_corpus_holds_every_expected_scenario_run_by_run() -> None:
    runs: dict[str, Counter[str]] = defaultdict(Counter)  # scenario -> workflow id -> runs recorded
    without_run_id = []
    for path in corpus():
        scenario, workflow_id, run_id = parse_history_file_name(path)
        runs[scenario][workflow_id] += 1
        if not run_id:
            without_run_id.append(path.name)
    missing = [f"{module}::{test}" for module, tests in EXPECTED_SCENARIOS.items() for test in tests if test not in runs]
    assert not missing, f"{len(missing)} scenarios have no history in {CORPUS}:\n  " + "\n  ".join(missing) + f"\n{RERECORD}"
    assert not without_run_id, (
        f"{len(without_run_id)} files were recorded before file names carried the run id (e.g. {without_run_id[0]}): "
        f"delete them (`rm tests/histories/*.json`) and {RERECORD}")
    single_run = [s for s in CONTINUED_AS_NEW if max(runs[s].values()) < 2]
    assert not single_run, f"no session with its runs before and after continue-as-new in: {single_run}; {RERECORD}"


async def test_a_session_run_just_now_replays(agent: Agent) -> None:
    session = await agent.start("book me a flight to Beijing on 2026-12-24")
    await pending_items(session)
    await session.signal("answer", {"answer": "Shanghai"})
    await session.signal("user_message", {"text": "please delete notes.txt"})
    await session.signal("approve", {"call_id": "nope"})
    [delete] = await eventually(
        lambda: query(session, "pending"), lambda items: [i["tool"] for i in items] == ["delete_file"]
    )
    await session.signal("reject", {"call_id": delete["call_id"], "reason": "no"})
    await settled(session)
    await worker_replayer().replay_workflow(await session.fetch_history())
