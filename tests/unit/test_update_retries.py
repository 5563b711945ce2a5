"""A client sends an Update again, with the same id, while the session says it was not applied.

The session refuses every Update with the code `busy` for the moment a local activity's result
is on its way (workflows/inbound.py, refuse_while_busy). Such a refusal
applied nothing, so hitl/client/updates.py sends it again; any other refusal is the answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from hitl.client import updates
from hitl.client.refusals import code_of
from workflows.contract import APPROVE


def refusal(code: str) -> WorkflowUpdateFailedError:
    return WorkflowUpdateFailedError(ApplicationError("why", code, type="Refusal", non_retryable=True))


class Session:
    """Refuses with the given codes, in order, then accepts; records the Update ids it was sent."""

    def __init__(self, *codes: str) -> None:
        self.codes = list(codes)
        self.ids: list[str] = []

    async def execute_update(self, name: str, payload: Any, *, id: str, result_type: Any = None) -> Any:
        self.ids.append(id)
        if self.codes:
            raise refusal(self.codes.pop(0))
        return {"accepted": True}


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(updates, "FIRST_DELAY_SECONDS", 0.0)


def test_the_refusal_carries_its_code() -> None:
    assert code_of(refusal("busy")) == "busy"


def test_a_busy_refusal_is_sent_again_with_the_same_id_until_taken() -> None:
    session = Session("busy", "busy")
    answer = asyncio.run(updates.execute_update_retrying(session, APPROVE.update, {"call_id": "c1"}))  # type: ignore[arg-type]
    assert answer == {"accepted": True}
    assert len(session.ids) == 3 and len(set(session.ids)) == 1


def test_any_other_refusal_is_the_answer_at_once() -> None:
    session = Session("forbidden")
    with pytest.raises(WorkflowUpdateFailedError):
        asyncio.run(updates.execute_update_retrying(session, APPROVE.update, {"call_id": "c1"}))  # type: ignore[arg-type]
    assert len(session.ids) == 1


def test_a_session_busy_for_longer_than_the_attempts_gets_its_refusal_back() -> None:
    session = Session(*["busy"] * updates.ATTEMPTS)
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        asyncio.run(updates.execute_update_retrying(session, APPROVE.update, {"call_id": "c1"}))  # type: ignore[arg-type]
    assert code_of(failed.value) == "busy" and len(session.ids) == updates.ATTEMPTS


def test_after_taking_a_message_the_api_waits_out_busy_instead_of_answering_503(monkeypatch: pytest.MonkeyPatch) -> None:
    """POST /sessions/{id}/messages with `wait`: the message was taken; waiting for the session to
    settle met `busy` for longer than the retries, and the caller got 503 "nothing was applied",
    so sending it again would send the message twice. It gets the session as it stands instead."""
    from hitl.api import gateway, sessions

    waits: list[int] = []

    async def busy_then_settled(request: Any, session_id: str, update: Any, payload: Any) -> Any:
        waits.append(payload["after_event"])
        if len(waits) < 3:
            raise gateway.Refused("busy", "the session is checking something with its worker")
        return {"status": {"state": "idle"}, "pending": [], "event": 9}

    async def never_busy(request: Any, session_id: str, update: Any, payload: Any) -> Any:
        raise gateway.Refused("conflict", "the session is closed")

    monkeypatch.setattr(sessions, "SETTLE_PAUSE_SECONDS", 0.0)
    monkeypatch.setattr(sessions, "send_update", busy_then_settled)
    assert asyncio.run(sessions.settle(None, "s", 4))["status"] == {"state": "idle"}  # type: ignore[arg-type]
    assert waits == [4, 4, 4]
    monkeypatch.setattr(sessions, "send_update", never_busy)
    with pytest.raises(gateway.Refused):
        asyncio.run(sessions.settle(None, "s", 4))  # type: ignore[arg-type]


def test_while_the_session_answers_running_the_api_asks_again_ever_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that hands over answers every waiter at once, and may wait a minute for a webhook
    before it goes: asked again at once, fifty Updates went into its history in a moment."""
    from hitl.api import sessions

    pauses: list[float] = []

    async def running(request: Any, session_id: str, update: Any, payload: Any) -> Any:
        return {"status": {"state": "running"}, "pending": [], "event": 1}

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(sessions, "send_update", running)
    monkeypatch.setattr(sessions.asyncio, "sleep", sleep)
    assert asyncio.run(sessions.settle(None, "s", 0))["status"]["state"] == "running"  # type: ignore[arg-type]
    assert len(pauses) == sessions.SETTLE_ROUNDS - 1
    assert pauses[:3] == [0.05, 0.1, 0.2] and max(pauses) == 1.0 and sum(pauses) > 30
