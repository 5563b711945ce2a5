"""A long session's transcript read back from each earlier run's history gives exactly what the queries give.

Earlier runs record their transcript by reference when they hand over
(workflows/transcript_index.py); hitl/client/run_history.py rebuilds it from
their history without replaying them. These sessions hand over several times,
with long model texts and tool results (referenced), decisions and steering
messages (kept as they are), plain and encrypted, and the two readings are
compared message for message. A run whose index names a string no payload
holds is read by queries instead.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.tools import tool
from tests.support.scripted_model import LongTurnModel
from hitl.client import run_history
from hitl.client.run_history import read_transcript
from hitl.client.sessions import measure_history, read_all, read_by_queries
from hitl.settings import data_converter
from tests.support.sessions import Agent, assert_well_formed, eventually, pending_items, query, running_agent, settled
from tests.support.stack import new_key
from workflows.conversation import ChatMessage
from workflows.transcript_index import REF_KEY, REF_MIN_BYTES, Unresolved, long_strings, referenced, resolved, transcript_index


@tool
def long_report(step: int) -> str:
    """Look something up and return a 6 KB report (for the transcript-reading tests)."""
    return f"report {step}: " + "lorem ipsum " * 500


def test_long_strings_are_referenced_and_put_back_short_ones_are_kept() -> None:
    long_text, short = "x" * REF_MIN_BYTES, "ok"
    message = ChatMessage.model_validate({"role": "assistant", "content": long_text, "tool_calls": [
        {"id": "c1", "function": {"name": "long_report", "arguments": '{"step": 1}'}}]})
    index = transcript_index(7, [message, ChatMessage(role="user", content=short)])
    assert index is not None and index["first_index"] == 7
    assert index["messages"][0]["content"] == {REF_KEY: referenced(long_text)[REF_KEY]}
    assert index["messages"][1]["content"] == short
    strings: dict[str, str] = {}
    long_strings({"nested": [long_text, short]}, strings)
    assert resolved(index["messages"], strings) == [message.to_openai(), {"role": "user", "content": short}]
    with pytest.raises(Unresolved):
        resolved(index["messages"], {})


async def long_turn(agent: Agent, steps: int, every: int) -> str:
    session = await agent.start("work through the long task", max_steps=steps, continue_as_new_after_events=every)
    await eventually(lambda: query(agent.client.get_workflow_handle(session.id), "status"),
                     lambda s: s["state"] == "idle", timeout=300)
    return session.id


async def assert_same_both_ways(client: Client, session_id: str, runs_at_least: int) -> list[dict[str, Any]]:
    assert (await measure_history(client, session_id)).runs >= runs_at_least
    newest = await client.get_workflow_handle(session_id).query("transcript_page", {"offset": None})
    assert newest["first_index"] > 0, "earlier runs hold part of the transcript (more than a hand-over carries)"
    from_history = await read_transcript(client, session_id)
    by_queries = await read_by_queries(client, session_id, "transcript_page", "messages")
    assert from_history is not None, "every earlier run recorded a usable index"
    assert from_history == by_queries
    assert await read_all(client, session_id, "transcript_page", "messages") == by_queries
    assert_well_formed(from_history)
    return from_history


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_long_turn_over_several_runs_reads_the_same_from_history_as_by_queries(
    env: WorkflowEnvironment, workspace: Path, encrypted: bool
) -> None:
    client = env.client
    if encrypted:
        client = await Client.connect(env.client.service_client.config.target_host,
                                      data_converter=data_converter(new_key()))
    model = LongTurnModel(steps=40, text_bytes=700, tool_name="long_report", remember_requests=False)
    async for agent in running_agent(client, workspace, model):
        session_id = await long_turn(agent, steps=40, every=80)
        transcript = await assert_same_both_ways(client, session_id, runs_at_least=3)
        assert len(transcript) == 1 + 2 * 39 + 1
        assert any(len(m.get("content") or "") >= REF_MIN_BYTES for m in transcript if m["role"] == "tool")


async def test_decisions_and_steering_across_runs_read_the_same_from_history_as_by_queries(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", continue_as_new_after_events=40, session_id=f"s-{uuid.uuid4().hex[:8]}")
    [item] = await pending_items(session)
    await session.signal("reject", {"call_id": item["call_id"], "by": "ana", "reason": "keep it"})
    await settled(session)
    for n in range(12):
        await agent.client.get_workflow_handle(session.id).signal("user_message", {"text": f"search for note {n} " + "n" * 20_000})
        await settled(agent.client.get_workflow_handle(session.id))
    transcript = await assert_same_both_ways(agent.client, session.id, runs_at_least=3)
    assert any("keep it" in (m.get("content") or "") for m in transcript if m["role"] == "tool")


async def test_a_run_whose_index_names_a_string_no_payload_holds_is_read_by_queries(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a referenced string be in none of a run's payloads (here: none is looked for), that run
    cannot be rebuilt: the transcript is read by queries, and is the same."""
    model_text = "w" * 20_000
    session = await agent.start("please delete notes.txt", continue_as_new_after_events=40, session_id=f"s-{uuid.uuid4().hex[:8]}")
    [item] = await pending_items(session)
    await session.signal("reject", {"call_id": item["call_id"], "by": "ana", "reason": "keep it"})
    await settled(session)
    for n in range(12):
        await agent.client.get_workflow_handle(session.id).signal("user_message", {"text": f"search for {model_text} {n}"})
        await settled(agent.client.get_workflow_handle(session.id))
    assert (await measure_history(agent.client, session.id)).runs >= 3
    newest = await agent.client.get_workflow_handle(session.id).query("transcript_page", {"offset": None})
    assert newest["first_index"] > 0
    assert await read_transcript(agent.client, session.id) is not None
    monkeypatch.setattr(run_history, "long_strings", lambda value, into: None)
    assert await read_transcript(agent.client, session.id) is None
    by_queries = await read_by_queries(agent.client, session.id, "transcript_page", "messages")
    assert await read_all(agent.client, session.id, "transcript_page", "messages") == by_queries
    assert any(model_text in (m.get("content") or "") for m in by_queries if m["role"] == "user")
