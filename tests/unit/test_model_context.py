"""The model activity's read of the conversation waits out a busy query buffer or worker.

The server holds one query per workflow while a workflow task is in flight and refuses the
next with "consistent query buffer is full". With a worker that replays every task, a session
polled for its status met it on most model calls, each refusal counted as a failed model call,
and the turn stalled (docs/observability.md, "Every task replays"). On a busy machine the
refusals outlasted the first few seconds of waiting, and a query could pass its deadline: a
session's model was reached 5 times in its 6 attempts. The read now waits up to a minute.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities import model_context
from activities.model_context import read_model_request
from workflows.requests import ConversationRef, ModelRequest

REFERENCE = ConversationRef(session_id="s", run_id="r", message_count=0, prefix_sha256="", model=None)
ANSWER = ModelRequest(messages=[], tools=[], model=None)


class Handle:
    def __init__(self, refusals: list[Exception]) -> None:
        self.refusals = refusals
        self.calls = 0

    async def query(self, *args: Any, **kwargs: Any) -> ModelRequest:
        self.calls += 1
        if self.refusals:
            raise self.refusals.pop(0)
        return ANSWER


class Client:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def get_workflow_handle(self, *args: Any, **kwargs: Any) -> Handle:
        return self.handle


def buffer_full() -> RPCError:
    return RPCError("consistent query buffer is full, this may be caused by too many queries", RPCStatusCode.RESOURCE_EXHAUSTED, b"")


def deadline_exceeded() -> RPCError:
    return RPCError("Timeout expired", RPCStatusCode.DEADLINE_EXCEEDED, b"")


class Clock:
    """Time that passes only when the read sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(model_context, "clock", fake, raising=False)
    monkeypatch.setattr(model_context, "sleep", fake.sleep, raising=False)
    return fake


async def test_a_full_query_buffer_is_waited_out_not_counted_as_a_failed_call() -> None:
    handle = Handle([buffer_full() for _ in range(3)])
    assert await read_model_request(Client(handle), REFERENCE) == ANSWER  # type: ignore[arg-type]
    assert handle.calls == 4


async def test_a_buffer_full_for_half_a_minute_and_queries_past_their_deadline_are_waited_out(clock: Clock) -> None:
    busy = Handle([buffer_full() for _ in range(20)])
    assert await read_model_request(Client(busy), REFERENCE) == ANSWER  # type: ignore[arg-type]
    assert 20 < clock.now < model_context.PATIENCE_SECONDS
    slow = Handle([deadline_exceeded(), deadline_exceeded()])
    assert await read_model_request(Client(slow), REFERENCE) == ANSWER  # type: ignore[arg-type]


async def test_a_buffer_that_stays_full_and_other_errors_still_fail_the_read(clock: Clock) -> None:
    always = Handle([buffer_full() for _ in range(1_000)])
    with pytest.raises(ApplicationError, match="query buffer is full"):
        await read_model_request(Client(always), REFERENCE)  # type: ignore[arg-type]
    assert clock.now <= model_context.PATIENCE_SECONDS
    other = Handle([RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")])
    with pytest.raises(ApplicationError, match="workflow not found"):
        await read_model_request(Client(other), REFERENCE)  # type: ignore[arg-type]
    assert other.calls == 1


async def test_a_query_the_workflow_failed_is_final_for_the_attempt_and_a_stale_reference_for_the_call() -> None:
    broken = Handle([WorkflowQueryFailedError("the handler raised")])
    with pytest.raises(ApplicationError) as failed:
        await read_model_request(Client(broken), REFERENCE)  # type: ignore[arg-type]
    assert failed.value.type == "ConversationUnavailable" and not failed.value.non_retryable and broken.calls == 1
    stale = Handle([WorkflowQueryFailedError("stale reference: this run does not hold that conversation")])
    with pytest.raises(ApplicationError) as final:
        await read_model_request(Client(stale), REFERENCE)  # type: ignore[arg-type]
    assert final.value.type == "StaleConversation" and final.value.non_retryable and stale.calls == 1
