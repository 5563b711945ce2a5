"""A run's first model call carries its conversation when it is small (workflows/requests.py,
OpeningMessages), so the model activity sends it without asking the workflow through the
`model_context` query; what the model receives is exactly what that query answers, and a
conversation too big to carry is still read through the query.

The worker's own client counts the `model_context` queries it sends (a client interceptor: the
SDK's door, not a stand-in for the product)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput
from temporalio.testing import WorkflowEnvironment

from activities.conversation_cache import chain_after
from activities.offline_model import OfflineModel
from tests.support.sessions import Agent, running_agent, settled
from workflows.contract import MODEL_CONTEXT
from workflows.requests import OPENING_BYTES, ConversationRef, ModelRequest


class CountedQueries(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, counted: Counter[str]) -> None:
        super().__init__(next)
        self.counted = counted

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        self.counted[input.query] += 1
        return await super().query_workflow(input)


class CountingQueries(Interceptor):
    def __init__(self) -> None:
        self.counted: Counter[str] = Counter()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return CountedQueries(next, self.counted)


class RecordingModel(OfflineModel):
    """The offline model, keeping each request it was sent."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        return await super().complete(request)


@pytest.fixture
def counting() -> CountingQueries:
    return CountingQueries()


@pytest.fixture
def model() -> RecordingModel:
    return RecordingModel()


@pytest.fixture
async def counted_agent(env: WorkflowEnvironment, workspace: Path, counting: CountingQueries,
                        model: RecordingModel) -> AsyncIterator[Agent]:
    """An agent whose worker's client counts the queries it sends (the model activity's among them)."""
    client = Client(env.client.service_client, namespace=env.client.namespace,
                    data_converter=env.client.data_converter, interceptors=[counting])
    async for running in running_agent(client, workspace, backend=model):
        yield running


async def as_the_query_answers(agent: Agent, session_id: str, run_id: str, sent: ModelRequest) -> ModelRequest:
    """What `model_context` answers for the conversation the model was sent (the query refuses a
    reference whose hash chain is not the run's own)."""
    messages = sent.messages[1:]
    reference = ConversationRef(session_id=session_id, run_id=run_id, message_count=len(messages),
                                prefix_sha256=chain_after("", messages), model=sent.model)
    handle = agent.client.get_workflow_handle(session_id, run_id=run_id)
    answer: ModelRequest = await handle.query(MODEL_CONTEXT.name, reference, result_type=MODEL_CONTEXT.result)
    return answer


async def test_a_runs_first_model_call_is_sent_without_asking_the_workflow(
        counted_agent: Agent, counting: CountingQueries, model: RecordingModel) -> None:
    session = await counted_agent.start("hello there", system_prompt="Answer in one short line.")
    status = await settled(session)
    assert status["error"] is None and status["last_answer"], status

    assert len(model.requests) == 1, model.requests
    assert counting.counted[MODEL_CONTEXT.name] == 0, counting.counted
    first = model.requests[0]
    assert first == await as_the_query_answers(counted_agent, session.id, session.result_run_id or "", first)
    assert first.messages[0].content == "Answer in one short line."


async def test_a_first_conversation_too_big_to_carry_is_read_through_the_query(
        counted_agent: Agent, counting: CountingQueries, model: RecordingModel) -> None:
    session = await counted_agent.start("hello " + "x" * OPENING_BYTES)
    status = await settled(session)
    assert status["error"] is None, status

    assert len(model.requests) == 1, model.requests
    assert counting.counted[MODEL_CONTEXT.name] == 1, counting.counted
    first = model.requests[0]
    assert first == await as_the_query_answers(counted_agent, session.id, session.result_run_id or "", first)
