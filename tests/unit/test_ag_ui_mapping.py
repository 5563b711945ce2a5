"""What AG-UI is told about a session's pauses and events, and what its resume entries decide: the
mapping alone (hitl/api/ag_ui_events.py, hitl/api/ag_ui_resume.py); tests/integration/test_ag_ui.py
drives it with the official client."""

from __future__ import annotations

import pytest
from ag_ui.core import ResumeEntry
from fastapi import HTTPException

from hitl.api.ag_ui_events import Translator, interrupt_of
from hitl.api.ag_ui_resume import ABANDONED, Resolution, resolution_of
from hitl.client.events import SessionEvent

APPROVAL = {"call_id": "call_1", "kind": "approval", "tool": "delete_file", "args": {"path": "notes.txt"},
            "deadline": "2026-12-24T10:00:00Z"}
FORM = {"call_id": "call_2", "kind": "question", "tool": "ask_user_question", "args": {}, "question": "When?",
        "fields": [{"name": "date", "type": "date"}, {"name": "class", "type": "enum", "choices": ["economy", "business"]},
                   {"name": "seats", "type": "integer", "required": False}]}
REVIEW = {"call_id": "call_3", "kind": "review", "tool": "draft_email", "args": {"to": "ana@example.com"}, "result": "Hi"}


def test_an_approval_is_a_tool_call_interrupt_with_ag_ui_s_recommended_schema() -> None:
    interrupt = interrupt_of(APPROVAL)
    assert (interrupt.id, interrupt.tool_call_id, interrupt.reason) == ("call_1", "call_1", "tool_call")
    assert interrupt.expires_at == "2026-12-24T10:00:00Z"
    schema = interrupt.response_schema or {}
    assert schema["required"] == ["approved"] and schema["additionalProperties"] is False
    assert schema["properties"]["approved"] == {"type": "boolean"}
    assert schema["properties"]["editedArgs"]["type"] == "object"
    assert set(schema["properties"]) == {"approved", "editedArgs", "reason", "comment"}
    assert interrupt.message == "approve delete_file: deletes notes.txt now"


def test_a_review_is_a_tool_call_interrupt_that_may_replace_the_result_not_the_args() -> None:
    interrupt = interrupt_of(REVIEW)
    assert (interrupt.tool_call_id, interrupt.reason) == ("call_3", "tool_call")
    schema = interrupt.response_schema or {}
    assert schema["required"] == ["approved"]
    assert set(schema["properties"]) == {"approved", "editedResult", "reason", "comment"}


def test_a_question_s_form_is_its_answer_schema() -> None:
    interrupt = interrupt_of(FORM)
    assert (interrupt.reason, interrupt.tool_call_id, interrupt.message) == ("input_required", "call_2", "When?")
    answer = (interrupt.response_schema or {})["properties"]["answer"]
    assert answer["properties"] == {"date": {"type": "string", "format": "date"},
                                    "class": {"enum": ["economy", "business"]}, "seats": {"type": "integer"}}
    assert answer["required"] == ["date", "class"]
    choices = interrupt_of({**FORM, "fields": None, "choices": ["yes", "no"]})
    assert (choices.response_schema or {})["properties"]["answer"] == {"enum": ["yes", "no"]}


def test_a_call_is_announced_once_and_a_call_that_ran_unpaused_still_starts_before_its_result() -> None:
    translate = Translator("s-1", opened={"call_1"})
    opened = translate.events_for(SessionEvent(id=3, type="pause_opened", data=APPROVAL))
    assert opened == []  # the run that paused announced it
    ran = translate.events_for(SessionEvent(id=4, type="tool_result", data={"call_id": "call_9", "tool": "read_file",
                                                                            "content": "hello"}))
    assert [event.type.value for event in ran] == ["TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT"]
    settled = translate.events_for(SessionEvent(id=5, type="pause_settled", data={"call_id": "call_1"}))
    assert [(event.type.value, getattr(event, "name", None)) for event in settled] == [("CUSTOM", "hitl.pause_settled")]


def entry(**given: object) -> ResumeEntry:
    return ResumeEntry.model_validate({"interruptId": "call_1", "status": "resolved", **given})


def test_resume_entries_in_ag_ui_s_recommended_shape_become_the_api_s_decisions() -> None:
    assert resolution_of(entry(payload={"approved": True})) == Resolution("call_1", "approve", {})
    assert resolution_of(entry(payload={"approved": True, "editedArgs": {"path": "a.txt"}, "comment": "this one"})) == (
        Resolution("call_1", "approve", {"args": {"path": "a.txt"}, "comment": "this one"}))
    assert resolution_of(entry(payload={"approved": True, "editedResult": "Hi."})) == Resolution(
        "call_1", "approve", {"result": "Hi."})
    assert resolution_of(entry(payload={"approved": False})) == Resolution("call_1", "reject", {})
    assert resolution_of(entry(payload={"approved": False, "reason": "not now"})) == Resolution(
        "call_1", "reject", {"reason": "not now"})
    refusals = {
        "approved must be true or false": [{"approved": "yes"}, {"approved": 1}, {"approved": None}],
        "editedArgs must be an object": [{"approved": True, "editedArgs": "a.txt"}, {"approved": True, "editedArgs": None}],
        "not with approved: false": [{"approved": False, "editedArgs": {}}, {"approved": False, "comment": "x"}],
        "only with approved: false": [{"approved": True, "reason": "x"}],
        "one shape": [{"approved": True, "decision": "approve"}],
        "unknown": [{"approved": True, "editedArgz": {}}],
    }
    for said, payloads in refusals.items():
        for payload in payloads:
            with pytest.raises(HTTPException) as refused:
                resolution_of(entry(payload=payload))
            assert refused.value.status_code == 422, payload
            assert str(refused.value.detail).startswith("resume call_1: ") and said in str(refused.value.detail), (
                payload, refused.value.detail)


def test_an_approval_can_be_bound_to_the_arguments_its_interrupt_showed() -> None:
    """Another approver may edit the arguments between the interrupt and the resume: the digest the
    interrupt offers, sent back, makes the decision count only for the arguments it showed."""
    schema = interrupt_of({**APPROVAL, "args_sha256": "ab" * 32}).response_schema or {}
    assert schema["properties"]["expectedArgsSha256"]["const"] == "ab" * 32
    assert schema["properties"]["expectedArgsSha256"]["default"] == "ab" * 32
    for approved, verb in ((True, "approve"), (False, "reject")):
        assert resolution_of(entry(payload={"approved": approved, "expectedArgsSha256": "ab" * 32})) == Resolution(
            "call_1", verb, {"expected_args_sha256": "ab" * 32})


def test_resume_entries_in_the_older_shape_still_become_the_api_s_decisions() -> None:
    assert resolution_of(entry(status="cancelled")) == Resolution("call_1", "reject", {"reason": ABANDONED})
    assert resolution_of(entry(payload={"decision": "approve", "args": {"path": "a.txt"}})) == Resolution(
        "call_1", "approve", {"args": {"path": "a.txt"}})
    assert resolution_of(entry(payload={"decision": "answer", "answer": "Paris"})) == Resolution(
        "call_1", "answer", {"answer": "Paris"})
    for payload in (None, {"decision": "maybe"}, {"decision": "reject", "args": {}}):
        with pytest.raises(HTTPException) as refused:
            resolution_of(entry(payload=payload))
        assert refused.value.status_code == 422 and str(refused.value.detail).startswith("resume call_1: ")


def test_a_payload_the_api_s_body_refuses_is_said_in_one_line() -> None:
    for payload in ({"decision": "reject", "args": {}}, {"approved": True, "comment": 5}):
        with pytest.raises(HTTPException) as refused:
            resolution_of(entry(payload=payload))
        assert refused.value.status_code == 422 and "\n" not in str(refused.value.detail), refused.value.detail
