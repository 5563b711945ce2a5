"""Another agent drives sessions through A2A with the official a2a-sdk client: a session is a task,
a pause is `input-required` with its card, a decision is a data part on the task."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.helpers.proto_helpers import get_data_parts, new_text_part
from a2a.types.a2a_pb2 import CancelTaskRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError, InvalidRequestError, TaskNotFoundError

from tests.support.a2a_client import a2a_as
from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually

INPUT_REQUIRED, COMPLETED = TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_COMPLETED


def card_of(task: Task) -> dict[str, Any]:
    """The one pause the task waits on: the data part of its status message."""
    [card] = get_data_parts(task.status.message.parts)
    return card


async def audit_of(api: Api, session_id: str) -> list[dict[str, Any]]:
    async with api.as_("ana") as http:
        return (await http.get(f"/sessions/{session_id}/audit")).json()


async def test_the_card_resolver_reads_the_agent_card(api: Api) -> None:
    async with httpx.AsyncClient() as http:  # the card is public, as A2A expects
        card = await A2ACardResolver(http, api.base).get_agent_card()
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding) == (f"{api.base}/a2a", "JSONRPC")
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert "bearer" in card.security_requirements[0].schemes


async def test_a_pause_is_input_required_and_an_approval_runs_the_tool_once(api: Api) -> None:
    async with a2a_as(api, "ana") as ana:
        task = await ana.start("please delete notes.txt")
        assert task.status.state == INPUT_REQUIRED
        assert task.context_id == task.id
        card = card_of(task)
        assert (card["kind"], card["tool"], card["args"]) == ("approval", "delete_file", {"path": "notes.txt"})
        assert card["approving"] == "deletes notes.txt now" and "owner: ana" in card["who_may_decide"]
        assert (await ana.get(task.id)).status.state == INPUT_REQUIRED

        done = await ana.decide(task, call_id=card["call_id"], decision="approve")
        assert done.status.state == COMPLETED, done.status
        [answer] = done.artifacts
        assert "notes.txt" in answer.parts[0].text
        assert (await ana.get(task.id)).status.state == COMPLETED
        with pytest.raises(InvalidRequestError, match="already settled"):
            await ana.decide(task, call_id=card["call_id"], decision="approve")
    assert not (api.agent.workspace / "notes.txt").exists()
    audit = await audit_of(api, task.id)
    [approved] = [event for event in audit if event["event"] == "approved"]
    assert (approved["by"], approved["via"]) == ("ana", "a2a")
    async with api.as_("ana") as http:
        transcript = (await http.get(f"/sessions/{task.id}/transcript")).json()
    assert [m["tool_call_id"] for m in transcript if m["role"] == "tool"] == [card["call_id"]]  # it ran once


async def test_a_rejection_carries_its_reason_to_the_model(api: Api) -> None:
    async with a2a_as(api, "ana") as ana:
        task = await ana.start("please delete notes.txt")
        call = card_of(task)["call_id"]
        done = await ana.decide(task, call_id=call, decision="reject", reason="keep it, it has my notes")
    assert done.status.state == COMPLETED
    assert (api.agent.workspace / "notes.txt").exists()
    [rejected] = [event for event in await audit_of(api, task.id) if event["event"] == "rejected"]
    assert (rejected["by"], rejected["via"]) == ("ana", "a2a")
    assert "keep it, it has my notes" in str(rejected)


async def test_a_question_is_answered_and_the_next_pause_follows(api: Api) -> None:
    async with a2a_as(api, "ana") as ana:
        task = await ana.start("book me a flight from Paris to Beijing")
        question = card_of(task)
        assert (question["kind"], question["tool"]) == ("question", "ask_user_question")
        assert [field["name"] for field in question["fields"]] == ["date"]
        with pytest.raises(InvalidParamsError, match="date"):  # the session's own form check, one line
            await ana.decide(task, call_id=question["call_id"], decision="answer", answer={"date": "next friday"})
        booking = await ana.decide(task, call_id=question["call_id"], decision="answer", answer={"date": "2027-03-05"})
        assert booking.status.state == INPUT_REQUIRED
        assert (card_of(booking)["tool"], card_of(booking)["args"]) == (
            "book_flight", {"origin": "Paris", "destination": "Beijing", "date": "2027-03-05"})
    [answered] = [event for event in await audit_of(api, task.id) if event["event"] == "answered"]
    assert (answered["by"], answered["via"]) == ("ana", "a2a")


async def test_someone_who_may_not_decide_is_refused_and_nothing_is_decided(api: Api) -> None:
    async with a2a_as(api, "ana") as ana, a2a_as(api, "carol") as carol, a2a_as(api, None) as nobody, \
            a2a_as(api, "bob") as bob:
        task = await ana.start("please delete notes.txt", approvers={"delete_file": ["bob"]})
        call = card_of(task)["call_id"]
        assert card_of(task)["who_may_decide"] == ["bob"]
        with pytest.raises(InvalidRequestError, match="ana may not decide delete_file; approvers: bob"):
            await ana.decide(task, call_id=call, decision="approve")
        with pytest.raises(TaskNotFoundError, match="unknown session"):  # carol has no part in it
            await carol.decide(task, call_id=call, decision="approve")
        with pytest.raises(InvalidParamsError, match="no call 'nope' waits"):
            await ana.decide(task, call_id="nope", decision="reject")
        with pytest.raises(InvalidParamsError, match="decision: one of approve, reject, answer"):
            await ana.decide(task, call_id=call, decision="maybe")
        with pytest.raises(InvalidParamsError, match="reject"):
            await ana.decide(task, call_id=call, decision="reject", answer="yes")
        with pytest.raises(A2AClientError, match="HTTP Error 401"):
            await nobody.send(new_text_part("hello"), task_id=task.id)
        assert (await ana.get(task.id)).status.state == INPUT_REQUIRED
        assert (api.agent.workspace / "notes.txt").exists()
        assert [event["event"] for event in await audit_of(api, task.id)] == ["requested"]
        done = await bob.decide(task, call_id=call, decision="approve")  # the approver, through the same door
    assert done.status.state == COMPLETED
    assert not (api.agent.workspace / "notes.txt").exists()
    decided = [(event["event"], event.get("by"), event.get("via")) for event in await audit_of(api, task.id)]
    assert decided[1:] == [("approved", "bob", "a2a")]


async def test_text_on_the_task_is_the_sessions_next_message_and_cancel_closes_it(api: Api) -> None:
    async with a2a_as(api, "ana") as ana, a2a_as(api, "carol") as carol:
        task = await ana.start("hello there")
        assert task.status.state == COMPLETED
        assert "offline stand-in" in task.artifacts[0].parts[0].text
        paused = await ana.send(new_text_part("please delete notes.txt"), task_id=task.id)
        assert paused.status.state == INPUT_REQUIRED and card_of(paused)["tool"] == "delete_file"
        with pytest.raises(TaskNotFoundError):  # not carol's to see, let alone cancel
            await carol.client.cancel_task(CancelTaskRequest(id=task.id))
        cancelled = await ana.client.cancel_task(CancelTaskRequest(id=task.id, metadata={"reason": "changed my mind"}))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        closed = await eventually(lambda: ana.get(task.id), lambda t: t.status.state == TaskState.TASK_STATE_CANCELED)
    assert "changed my mind (by ana)" in closed.status.message.parts[0].text
    assert (api.agent.workspace / "notes.txt").exists()


async def test_without_a_token_nothing_is_started(api: Api) -> None:
    async with a2a_as(api, None) as nobody:
        with pytest.raises(A2AClientError, match="HTTP Error 401"):
            await nobody.start("please delete notes.txt")
