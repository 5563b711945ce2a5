"""A model endpoint that misbehaves ends the turn with an error; it never wedges the
session, leaks the API key, or sends a reply too big to carry.

Malformed 200 bodies become counted ModelBadResponse failures (final after the
model call's attempts), provider messages are scrubbed of the key and of
bearer tokens before they are raised, and one reply is bounded in bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.model import MODEL_ATTEMPTS, ModelActivities
from activities.openai_backend import OpenAIBackend
from activities.reply_bounds import MAX_ARGUMENTS_BYTES, MAX_CONTENT_BYTES, MAX_TOOL_CALLS, OVERSIZED_ARGUMENTS
from activities.run_tool import MAX_RESULT_BYTES, ToolActivities, within_limit
from activities.tools import ToolError, ToolSpec
from activities.tools.catalog import ToolCatalog
from tests.support.sessions import SECRET_KEY, Agent, eventually, query, settled
from tests.support.fake_openai import FakeOpenAI, Reply, completion, echoing_authorization, malformed, text, tool_calls
from workflows.conversation import ChatMessage, ModelReply
from workflows.requests import ModelRequest, ToolInvocation

MALFORMED: dict[str, Reply] = {
    "a JSON list": malformed([{"choices": []}]),
    "a null message": malformed({"choices": [{"message": None}]}),
    "choices not a list": malformed({"choices": {"0": {"message": {"content": "hi"}}}}),
    "tool_calls of the wrong shape": completion({"role": "assistant", "tool_calls": [{"id": "x", "function": "delete_file"}]}),
    "not JSON": malformed(raw=b"<html><body>502 Bad Gateway</body></html>"),
    "tool_calls not a list": completion({"role": "assistant", "tool_calls": {"id": "x"}}),
    "content a number": completion({"role": "assistant", "content": 42}),
}
REQUEST = ModelRequest(messages=[ChatMessage(role="user", content="hi")], tools=[])


async def call_model_on_attempt(backend: Any, attempt: int) -> ModelReply:
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, attempt=attempt)
    return await environment.run(ModelActivities(backend).call_model, REQUEST)


async def reply_to(*replies: Reply) -> ModelReply:
    with FakeOpenAI(*replies) as fake:
        return await OpenAIBackend(SECRET_KEY, fake.base_url, "test-model").complete(REQUEST)


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
async def test_a_malformed_reply_is_a_counted_failure_of_the_call(case: str) -> None:
    with FakeOpenAI(MALFORMED[case], MALFORMED[case]) as fake:
        backend = OpenAIBackend(SECRET_KEY, fake.base_url, "test-model")
        with pytest.raises(ApplicationError) as early:
            await call_model_on_attempt(backend, 1)
        assert early.value.type == "ModelBadResponse" and not early.value.non_retryable
        assert "malformed reply" in early.value.message
        with pytest.raises(ApplicationError) as last:
            await call_model_on_attempt(backend, MODEL_ATTEMPTS)
        assert last.value.type == "ModelBadResponse" and last.value.non_retryable


async def test_a_backend_that_crashes_is_counted_too() -> None:
    class BrokenBackend:
        description = "broken"

        async def complete(self, request: ModelRequest) -> ModelReply:
            raise KeyError("choices")

    with pytest.raises(ApplicationError) as early:
        await call_model_on_attempt(BrokenBackend(), 1)
    assert early.value.type == "ModelBadResponse" and not early.value.non_retryable
    with pytest.raises(ApplicationError) as last:
        await call_model_on_attempt(BrokenBackend(), MODEL_ATTEMPTS)
    assert last.value.non_retryable and "KeyError" in last.value.message


async def test_every_malformed_reply_ends_the_turn_idle_with_the_error(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    """Through real sessions, all at once: the retry policy waits 1+2+4+8+16 s before the last attempt."""
    agent, fake = openai_agent
    for case, reply in MALFORMED.items():
        fake.route(f"[{case}]", reply)
    sessions = {case: await agent.start(f"hello [{case}]") for case in MALFORMED}

    ended = await asyncio.gather(*(
        eventually(lambda s=session: query(s, "status"), lambda status: status["state"] == "idle", timeout=90)
        for session in sessions.values()
    ))
    for case, status in zip(sessions, ended):
        assert status["error"] and "malformed reply" in status["error"], (case, status)
    for case in MALFORMED:
        sent = [r for r in fake.requests if f"[{case}]" in r["messages"][1]["content"]]
        assert len(sent) == MODEL_ATTEMPTS, (case, len(sent))


async def test_a_key_echoed_in_a_401_reaches_neither_status_nor_history(
    openai_agent: tuple[Agent, FakeOpenAI], caplog: pytest.LogCaptureFixture
) -> None:
    agent, fake = openai_agent
    fake.script(echoing_authorization(401))
    session = await agent.start("hi")

    status = await settled(session)
    assert "401" in status["error"] and "Bearer [redacted]" in status["error"], status["error"]
    await assert_nowhere(session, status, caplog)


async def test_a_key_echoed_in_a_500_is_scrubbed_from_every_attempt(
    openai_agent: tuple[Agent, FakeOpenAI], caplog: pytest.LogCaptureFixture
) -> None:
    agent, fake = openai_agent
    fake.script(*(echoing_authorization(500, **{"Retry-After-Ms": "10"}) for _ in range(MODEL_ATTEMPTS)))
    session = await agent.start("hi")

    status = await settled(session)
    assert "500" in status["error"] and "[redacted]" in status["error"], status["error"]
    assert len(fake.requests) == MODEL_ATTEMPTS
    await assert_nowhere(session, status, caplog)


async def assert_nowhere(session: Any, status: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    assert SECRET_KEY not in json.dumps(status)
    assert SECRET_KEY not in (await session.fetch_history()).to_json()
    assert SECRET_KEY not in caplog.text, "the worker log"


def test_scrubbing_covers_the_key_and_token_shapes() -> None:
    backend = OpenAIBackend("my-own-key-1234", "http://127.0.0.1:9/v1", "m")
    scrubbed = backend.scrub("key my-own-key-1234, header bearer abc.def-ghi, other sk-proj-AbC123xyz_987 end")
    assert "my-own-key-1234" not in scrubbed and "abc.def-ghi" not in scrubbed and "AbC123xyz" not in scrubbed
    assert scrubbed.endswith("end")


async def test_a_reply_is_bounded_in_bytes_not_characters() -> None:
    long_text = "中" * 60_000  # 60,000 characters, 180,000 bytes
    reply = await reply_to(text(long_text))
    assert reply.content is not None and len(reply.content.encode()) <= MAX_CONTENT_BYTES
    assert long_text.startswith(reply.content) and len(reply.content) == MAX_CONTENT_BYTES // 3


async def test_oversized_arguments_are_replaced_by_a_marker_never_cut() -> None:
    fits = {"path": "x" * 1000}
    too_big_in_bytes = {"body": "中" * 12_000}  # 12,000 characters, but 36,000+ bytes
    reply = await reply_to(tool_calls(("a", "send_email", fits), ("b", "send_email", too_big_in_bytes)))
    first, second = reply.tool_calls
    assert json.loads(first.function.arguments) == fits
    size = len(json.dumps(too_big_in_bytes).encode())
    assert size > MAX_ARGUMENTS_BYTES
    assert second.function.arguments == f'{{"{OVERSIZED_ARGUMENTS}": {size}}}'


async def test_a_reply_carries_a_bounded_number_of_calls_and_bytes() -> None:
    """Each call's arguments fit their own limit, but escaping doubles them: the reply as a whole is bounded too."""
    quotes = '"' * 30_000  # 30,000 bytes as text, 60,000 once JSON-escaped into the payload
    calls = [(f"c{i}", "search_web", quotes) for i in range(MAX_TOOL_CALLS + 36)]
    reply = await reply_to(tool_calls(*calls))
    assert len(reply.tool_calls) == MAX_TOOL_CALLS
    assert reply.tool_calls[0].function.arguments == quotes, "the first calls keep their arguments"
    assert reply.tool_calls[-1].function.arguments == f'{{"{OVERSIZED_ARGUMENTS}": 30000}}'
    assert len(reply.model_dump_json().encode()) < 1_000_000, "well under Temporal's 2 MB payload limit"


def test_a_tool_result_is_bounded_in_bytes_on_a_character_boundary() -> None:
    result = within_limit("中" * 99_000)
    assert len(result.encode()) <= MAX_RESULT_BYTES
    assert result.startswith("中" * 21_000) and result.endswith("more bytes cut]")
    assert within_limit("short") == "short"


async def test_a_tool_refusal_is_bounded_like_a_result(workspace: Any) -> None:
    class NoArguments(BaseModel):
        pass

    def refuse_at_length() -> str:
        raise ToolError("no! " * 100_000)

    catalog = ToolCatalog()
    catalog.add(ToolSpec(name="verbose", description="refuses at length", arguments=NoArguments, function=refuse_at_length))
    invocation = ToolInvocation(session_id="s1", call_id="c1", tool="verbose", args={})
    with pytest.raises(ApplicationError) as refusal:
        await ActivityEnvironment().run(ToolActivities(workspace, catalog).run_tool, invocation)
    assert refusal.value.type == "ToolError" and len(refusal.value.message.encode()) <= MAX_RESULT_BYTES
