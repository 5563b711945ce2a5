"""What continue-as-new carries is one RunState: every input an earlier run wrote reads, and
a hand-over trims only what it says it trims, so no field can be left behind."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from workflows.conversation import ChatMessage, Conversation
from workflows.events import EventLog
from workflows.handover import AUDIT_CARRIED, RunState, shrink_to_fit
from workflows.rules import Grant
from workflows.session import AuditEvent, UserMessage

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
CORPUS = Path(__file__).resolve().parents[1] / "histories"


def carried_inputs() -> list[tuple[str, dict[str, Any]]]:
    """The `carried` key of every recorded run that a previous run started."""
    found = []
    for path in sorted(CORPUS.rglob("*.json")):
        started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
        payloads = (started.get("input") or {}).get("payloads") or []
        if not started.get("continuedExecutionRunId") or not payloads:
            continue
        if base64.b64decode(payloads[0].get("metadata", {}).get("encoding", "")) != b"json/plain":
            continue  # an encrypted session's input
        start_input = json.loads(base64.b64decode(payloads[0]["data"]))
        if isinstance(start_input, dict) and start_input.get("carried"):
            found.append((str(path.relative_to(CORPUS)), start_input["carried"]))
    return found


CARRIED = carried_inputs()


def test_the_corpus_holds_hand_overs_of_every_supported_build() -> None:
    """Every build the corpus holds is supported (tests/integration/test_replay.py, FIRST_SUPPORTED_BUILD):
    a hand-over of a session at rest and one with a message queued."""
    scenarios = {name.split("--")[0] for name, _ in CARRIED}
    assert {"test_a_session_continues_as_new_and_keeps_transcript_audit_and_memory",
            "test_a_message_queued_at_the_hand_over_to_a_new_run_is_answered"} <= scenarios, scenarios


@pytest.mark.parametrize("carried", [carried for _, carried in CARRIED], ids=[name[:80] for name, _ in CARRIED])
def test_what_an_earlier_run_handed_over_reads_back_as_it_was_written(carried: dict[str, Any]) -> None:
    state = RunState.model_validate(carried)
    again = RunState.model_validate(state.model_dump(mode="json"))
    assert again.model_dump(mode="json") == state.model_dump(mode="json")
    written = state.model_dump(mode="json")
    assert set(carried) <= set(written)  # nested models may have gained fields since, with defaults
    assert [written[key] for key in ("turn", "total_steps", "first_message_index")] == [
        carried.get(key, 0) for key in ("turn", "total_steps", "first_message_index")]
    assert len(state.messages) == len(carried["messages"]) and len(state.inbox) == len(carried.get("inbox", []))


def test_a_state_written_before_the_event_stream_and_verified_decisions_reads_with_both_unset() -> None:
    """An earlier build wrote no `events` or `verifier`, or nulls: read, the state has an empty event
    log and leaves `verifier` unset, so the run that resumes it gives it the verifier its own start
    input asks for (Continuing.resume) rather than one that asks for nothing."""
    base = {"messages": [], "turn": 1, "total_steps": 1}
    for written in ({}, {"events": None, "verifier": None}):
        state = RunState.model_validate({**base, **written})
        assert "verifier" not in state.model_fields_set and state.events == EventLog()
    carried = RunState.model_validate({**base, "verifier": {"required": True}})
    assert "verifier" in carried.model_fields_set and carried.verifier.required


def a_long_session() -> RunState:
    state = RunState(messages=[], turn=7, total_steps=40, steps=3, inbox=[UserMessage(text="next", by="ana")],
                     events=EventLog(), in_turn=True, speaker="ana", last_answer="done", error="a problem",
                     used_call_ids=["c1"], idle_until=NOW + timedelta(hours=1), speaker_asserted=True,
                     authors_since_reply=["ana"], authors_of_reply=["bo"], results_this_turn=[("search_web", "c1")],
                     ignored_signals=[{"signal": "approve", "reason": "no such call", "at": NOW.isoformat()}])
    for n in range(AUDIT_CARRIED + 25):
        state.audit.append(AuditEvent(at=NOW, event="requested", call_id=f"c{n}"))
    state.grants = [
        Grant(tool="search_web", args_sha256=None, scope="tool", by="ana", until=NOW + timedelta(hours=1), call_id="c1"),
        Grant(tool="delete_file", args_sha256=None, scope="tool", by="ana", until=NOW - timedelta(seconds=1), call_id="c2"),
    ]
    for n in range(3):
        state.events.add("message", NOW, text=f"message {n}")
    return state


def test_a_hand_over_keeps_the_newest_audit_and_live_grants_and_everything_else_whole() -> None:
    live = a_long_session()
    handed = live.for_next_run(NOW)
    assert [event.call_id for event in handed.audit] == [event.call_id for event in live.audit[-AUDIT_CARRIED:]]
    assert handed.first_audit_index == 25
    assert [grant.call_id for grant in handed.grants] == ["c1"]
    assert handed.events is not None and handed.events.last_id == 3
    trimmed = {"audit", "first_audit_index", "grants", "events"}
    for field in RunState.model_fields.keys() - trimmed:
        assert getattr(handed, field) == getattr(live, field), field


def test_the_messages_are_cut_to_the_budget_and_counted_from_the_whole_transcript() -> None:
    conversation = Conversation()
    for n in range(400):
        conversation.add_user(f"{n} " + "x" * 1_000)
    live = RunState(messages=conversation.messages, first_message_index=10, turn=400, total_steps=400)
    handed = shrink_to_fit(live.for_next_run(NOW), conversation)
    assert handed is not None and 0 < len(handed.messages) < 400
    assert handed.messages[-1] == ChatMessage(role="user", content="399 " + "x" * 1_000)
    assert handed.first_message_index == 10 + 400 - len(handed.messages)
    assert len(live.messages) == 400  # the live run keeps all of its own
