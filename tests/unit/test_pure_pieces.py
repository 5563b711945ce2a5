"""The deterministic pieces, without a server: conversation, pauses, forms, planning, tools."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from activities.offline_model import parse_delete, parse_email, parse_flight, respond
from activities.tools import CATALOG
from activities.tools.bookings import all_bookings, book_once
from activities.tools.errors import ToolError
from activities.tools.workspace import inside_workspace
from workflows.conversation import TRIMMED, ChatMessage, Conversation, FunctionCall, ModelReply, ToolCall
from workflows.forms import check_answer
from workflows.decisions import Answer, Approve, Refusal, Reject, parse_decision
from workflows.pauses import Pauses, PendingCall
from workflows.planning import plan_call, with_unique_call_ids
from workflows.rules import args_sha256

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def test_a_conversation_refuses_to_move_on_with_an_unanswered_call() -> None:
    conversation = Conversation()
    conversation.add_user("hi")
    conversation.add_assistant(ModelReply(tool_calls=[call("a", "search_web", "{}"), call("b", "search_web", "{}")]))
    with pytest.raises(ValueError, match="have no result"):
        conversation.add_user("next")
    conversation.add_tool_result("b", "done")
    with pytest.raises(ValueError, match="no unanswered tool call 'b'"):
        conversation.add_tool_result("b", "again")
    conversation.settle_unanswered("cancelled")
    conversation.add_user("next")
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "tool", "user"]


def approval(call_id: str = "c1", deadline: datetime | None = None) -> PendingCall:
    return PendingCall(call_id=call_id, kind="approval", tool="delete_file", args={"path": "a.txt"},
                       args_sha256=args_sha256({"path": "a.txt"}), requested_at=NOW, deadline=deadline)


def test_decisions_settle_a_pending_call_in_the_expected_way() -> None:
    pauses = Pauses()
    pauses.request(approval())
    approved = pauses.decide(Approve(by="ana"), CATALOG, NOW)
    assert (approved.outcome, approved.run_with, approved.note) == ("approved", {"path": "a.txt"}, None)
    edited = pauses.decide(Approve(args={"path": "b.txt"}, comment="the other one"), CATALOG, NOW)
    assert edited.outcome == "edited" and edited.run_with == {"path": "b.txt"}
    assert "edited the arguments" in edited.note and "the other one" in edited.note
    rejected = pauses.decide(Reject(reason="no"), CATALOG, NOW)
    assert rejected.run_with is None and rejected.result == "Rejected by a person; the tool did not run. Reason: no"
    assert pauses.open, "deciding alone changes nothing"
    pauses.settle(rejected)
    with pytest.raises(Refusal, match="already settled"):
        pauses.decide(Approve(call_id="c1"), CATALOG, NOW)


def test_malformed_decisions_are_refusals() -> None:
    with pytest.raises(Refusal, match="malformed approve"):
        parse_decision("approve", ["not", "an", "object"])
    with pytest.raises(Refusal, match="answer"):
        parse_decision("answer", {"call_id": "x"})
    assert parse_decision("reject", None) == Reject()
    assert parse_decision("answer", "Shanghai") == Answer(answer="Shanghai")


def test_expired_pauses_say_how_long_nobody_answered() -> None:
    pauses = Pauses()
    pauses.request(approval("early", NOW + timedelta(seconds=60)))
    pauses.request(approval("late", NOW + timedelta(seconds=600)))
    assert pauses.next_event() == NOW + timedelta(seconds=60)
    [due] = pauses.due(NOW + timedelta(seconds=61))
    expired = pauses.expire(due, 60, NOW + timedelta(seconds=61))
    assert expired.call_id == "early" and expired.result == "No answer within 60 seconds; cancelled. The tool did not run."
    assert [p.call_id for p in pauses.open] == ["late"]


def test_answers_are_checked_against_choices_and_forms() -> None:
    assert check_answer(" Economy ", ["economy", "business"], None) == "economy"
    with pytest.raises(ValueError, match="not one of the choices"):
        check_answer("first", ["economy"], None)
    with pytest.raises(ValueError, match="empty"):
        check_answer("  ", None, None)
    fields = [{"name": "when", "type": "date"}, {"name": "seats", "type": "integer"},
              {"name": "class", "type": "enum", "choices": ["economy", "business"], "required": False}]
    assert check_answer({"when": "2026-12-24", "seats": "2"}, None, fields) == {"when": "2026-12-24", "seats": 2}
    with pytest.raises(ValueError, match="unknown fields"):
        check_answer({"when": "2026-12-24", "seats": 1, "pets": 3}, None, fields)
    with pytest.raises(ValueError, match="class"):
        check_answer({"when": "2026-12-24", "seats": 1, "class": "first"}, None, fields)


def test_answering_needs_a_question() -> None:
    pauses = Pauses()
    pauses.request(approval())
    with pytest.raises(Refusal, match="use approve or reject"):
        pauses.decide(Answer(answer="yes"), CATALOG, NOW)


def test_planning_sorts_calls_into_run_pause_ask_and_refuse() -> None:
    offered = {spec.name: spec for spec in CATALOG.select(None)}
    assert plan_call(call("1", "search_web", '{"query": "x"}'), offered).action == "run"
    assert plan_call(call("2", "delete_file", '{"path": "x"}'), offered).action == "approve"
    assert plan_call(call("3", "ask_user_question", '{"question": "?"}'), offered).action == "ask"
    assert plan_call(call("4", "nope", "{}"), offered).action == "refuse"
    assert plan_call(call("5", "delete_file", "{"), offered).action == "refuse"
    only_search = {"search_web": CATALOG.get("search_web")}
    assert "no tool named 'delete_file'" in plan_call(call("6", "delete_file", '{"path": "x"}'), only_search).refusal


def test_call_ids_are_made_unique_within_a_session() -> None:
    reply = ModelReply(tool_calls=[call("", "search_web", "{}"), call("x", "search_web", "{}"), call("x", "a", "{}")])
    ids = [c.id for c in with_unique_call_ids(reply, {"x_4_1"}, step=4).tool_calls]
    assert len(set(ids)) == 3 and "x_4_1" not in ids and ids[0] == "call_4_0"


def test_workspace_paths_cannot_escape(tmp_path: Path) -> None:
    (tmp_path / "inside.txt").write_text("x")
    assert inside_workspace(tmp_path, "inside.txt") == (tmp_path / "inside.txt").resolve()
    (tmp_path / "escape").symlink_to("/etc")
    for path in ["../x", "/etc/passwd", "escape/passwd", "", "a/../../x"]:
        with pytest.raises(ToolError):
            inside_workspace(tmp_path, path)


def test_a_booking_is_made_once_per_call_however_often_it_is_retried(tmp_path: Path) -> None:
    first = book_once(tmp_path, "s1", "call_1", "Shanghai", "Beijing", "2026-12-24")
    again = book_once(tmp_path, "s1", "call_1", "Shanghai", "Beijing", "2026-12-24")
    other = book_once(tmp_path, "s1", "call_2", "Shanghai", "Beijing", "2026-12-24")
    assert first == again and first.reference != other.reference
    assert len(all_bookings(tmp_path)) == 2


def test_the_offline_model_understands_plain_english() -> None:
    assert parse_delete("please delete the file notes.txt.") == {"path": "notes.txt"}
    assert parse_flight("book me a flight from Paris to New York on 2026-12-24") == {
        "origin": "Paris", "destination": "New York", "date": "2026-12-24"}
    assert parse_email("send an email to ana@example.com about lunch saying see you at noon") == {
        "to": "ana@example.com", "subject": "lunch", "body": "see you at noon"}
    tools = {"ask_user_question", "book_flight"}
    reply = respond([ChatMessage(role="user", content="book me a flight to Beijing")], tools)
    assert reply.tool_calls[0].name == "ask_user_question"
    assert "offline stand-in" in respond([ChatMessage(role="user", content="hello")], tools).content


def test_a_long_conversation_is_trimmed_for_the_model_but_keeps_its_shape() -> None:
    conversation = Conversation()
    conversation.add_user("go")
    for n in range(5):
        conversation.add_assistant(ModelReply(tool_calls=[call(f"c{n}", "search_web", "{}")]))
        conversation.add_tool_result(f"c{n}", str(n) * 10_000)
    request = conversation.window(22_000)
    assert [m.role for m in request] == [m.role for m in conversation.messages]
    contents = [m.content for m in request if m.role == "tool"]
    assert contents[:3] == [TRIMMED] * 3 and contents[3:] == ["3" * 10_000, "4" * 10_000]
    assert conversation.messages[2].content == "0" * 10_000, "the transcript itself keeps everything"


def test_budgets_count_bytes_and_what_does_not_fit_is_left_out_with_a_note() -> None:
    conversation = Conversation()
    for n in range(50):
        conversation.add_user("雪" * 1000)  # 3,000 bytes each, though 1,000 characters
        conversation.add_assistant(ModelReply(content="ok"))
    request = conversation.window(10_000, omitted_before=7)
    assert sum(len((m.content or "").encode()) for m in request) < 10_000 * 1.1
    assert request[0].role == "user" and request[0].content.startswith("[")
    left_out = int(request[0].content.split()[0][1:])
    assert left_out == 7 + 100 - (len(request) - 1)
    assert request[-1] == conversation.messages[-1]


def test_the_carried_tail_never_starts_with_an_orphaned_result() -> None:
    conversation = Conversation()
    conversation.add_user("go")
    conversation.add_assistant(ModelReply(tool_calls=[call("a", "search_web", "{}"), call("b", "search_web", "{}")]))
    conversation.add_tool_result("a", "x" * 5_000)
    conversation.add_tool_result("b", "y" * 5_000)
    tail = conversation.tail(6_000)
    assert tail[0].role == "assistant" and [m.role for m in tail] == ["assistant", "tool", "tool"]


def test_long_user_messages_give_way_too_but_never_the_latest() -> None:
    conversation = Conversation()
    for n in range(4):
        conversation.add_user(str(n) * 1000)
        conversation.add_assistant(ModelReply(content="ok"))
    conversation.add_user("5" * 1000)
    request = conversation.window(2500)
    users = [m.content for m in request if m.role == "user"]
    assert users[:3] == [TRIMMED] * 3 and users[3:] == ["3" * 1000, "5" * 1000]
