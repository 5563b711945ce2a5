"""Every entry of the bad-input catalogue (tests/bad_inputs.py), against a real server.

Each check ends by confirming the session still works: nothing was lost, no
workflow task failed, nothing is stuck.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from tests import bad_inputs, example_tools  # noqa: F401  (example_tools registers huge_report)
from tests.bad_inputs import AFTER_SETTLING, CLI_CALLS, DECISIONS, MODEL_REPLIES, SESSION_STARTS, TOOL_FAILURES
from tests.conftest import Agent, eventually, pending_items, query, settled
from tests.fake_openai import FakeOpenAI, Reply, completion, error, text, tool_calls

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bad-inputs.md"


def test_the_catalogue_has_at_least_forty_entries_and_its_page_is_current() -> None:
    page = bad_inputs.render()
    assert page.count("\n| ") - 1 >= 40
    assert DOC.read_text() == page, "run: python -m tests.bad_inputs > docs/bad-inputs.md"


async def no_failed_workflow_tasks(session: WorkflowHandle[Any, Any]) -> None:
    history = await session.fetch_history()
    failed = [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
    assert not failed, failed


async def refused_both_ways(session: WorkflowHandle[Any, Any], verb: str, payload: Any, reason: str) -> None:
    """The Update is rejected with the reason; the signal is ignored and recorded with it."""
    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await session.execute_update(f"{verb}_update", payload)
    assert reason in failure.value.cause.message
    await session.signal(verb, payload)
    status = await eventually(lambda: query(session, "status"), lambda s: bool(s["ignored_signals"]))
    assert reason in status["ignored_signals"][-1]["reason"]
    assert status["ignored_signals"][-1]["signal"] == verb


@pytest.mark.parametrize("case", DECISIONS, ids=lambda c: c.what)
async def test_a_bad_decision_is_refused_by_signal_and_update_alike(agent: Agent, case: bad_inputs.Decision) -> None:
    session = await agent.start(case.session, **case.options)
    before = await pending_items(session)
    for verb, payload in case.prepare:
        await session.execute_update(f"{verb}_update", payload)
        before = await query(session, "pending")

    await refused_both_ways(session, case.verb, case.payload, case.reason)
    assert await query(session, "pending") == before, "a refused decision changes nothing"
    assert (await query(session, "audit"))[-1]["event"] == "refused"
    await no_failed_workflow_tasks(session)


@pytest.mark.parametrize("case", AFTER_SETTLING, ids=lambda c: c.what)
async def test_decisions_after_settling_are_refused(agent: Agent, case: bad_inputs.SettledDecision) -> None:
    session = await agent.start(bad_inputs.DELETE)
    await pending_items(session)
    await session.execute_update("approve_update", {})
    await settled(session)
    await refused_both_ways(session, case.verb, case.payload, case.reason)


def scripted(reply: dict[str, Any]) -> list[Reply]:
    if "status" in reply:
        first = error(reply["status"], f"provider says {reply['status']}")
    elif reply.get("no_choices"):
        first = completion({"role": "assistant", "content": "x"})
        first.body["choices"] = []
    else:
        calls = [(f"c{i}" if not reply.get("same_ids") else "c0", name, args) for i, (name, args) in enumerate(reply["calls"])]
        first = tool_calls(*calls)
        if reply.get("object_args"):
            for call, (_, _, args) in zip(first.body["choices"][0]["message"]["tool_calls"], calls):
                call["function"]["arguments"] = args
    return [first, text("ok")] if "then" in reply or "calls" in reply else [first]


@pytest.mark.parametrize("case", MODEL_REPLIES, ids=lambda c: c.what)
async def test_a_bad_model_reply_never_strands_the_session(openai_agent: tuple[Agent, FakeOpenAI], case: bad_inputs.ModelReply) -> None:
    agent, fake = openai_agent
    fake.script(*scripted(case.reply))
    session = await agent.start("go")

    status = await settled(session)
    transcript = await query(session, "transcript")
    if "calls" in case.reply:
        results = [m["content"] for m in transcript if m["role"] == "tool"]
        assert len(results) == len(case.reply["calls"])
        if case.outcome.startswith("tool result: "):
            expected = case.outcome.removeprefix("tool result: ").split("...")[0]
            assert results[0].startswith(expected), results[0]
        else:
            ids = [c["id"] for m in transcript for c in m.get("tool_calls") or []]
            assert len(set(ids)) == 2
        assert status["last_answer"] == "ok"
    elif "then" in case.reply:
        assert status["last_answer"] == "ok" and status["error"] is None and len(fake.requests) == 2
    else:
        assert status["state"] == "idle" and f"({case.reply['status']})" in status["error"]
        assert f"provider says {case.reply['status']}" in status["error"] and len(fake.requests) == 1
    await no_failed_workflow_tasks(session)


@pytest.mark.parametrize("case", TOOL_FAILURES, ids=lambda c: c.what)
async def test_a_failing_tool_is_reported_to_the_model(openai_agent: tuple[Agent, FakeOpenAI], case: bad_inputs.ToolFailure) -> None:
    agent, fake = openai_agent
    (agent.workspace / "folder").mkdir()
    name, args = case.call
    fake.script(tool_calls(("t1", name, args)), text("noted"))
    session = await agent.start("go", auto_approve=["*"])
    status = await settled(session)
    result = next(m["content"] for m in await query(session, "transcript") if m["role"] == "tool")
    assert result.startswith(case.outcome), result
    assert status["last_answer"] == "noted"


@pytest.mark.parametrize("case", SESSION_STARTS, ids=lambda c: c.what)
async def test_bad_session_input_fails_the_start_with_the_reason(agent: Agent, case: bad_inputs.SessionStart) -> None:
    session = await agent.client.start_workflow("AgentWorkflow", case.input, id=f"bad-{abs(hash(case.what))}", task_queue=agent.task_queue)
    with pytest.raises(WorkflowFailureError) as failure:
        await session.result()
    expected = case.outcome.split("invalid session input", 1)[1].split("...")[0]
    assert failure.value.cause.message.startswith("invalid session input")
    assert expected.strip(": ") in failure.value.cause.message
    await no_failed_workflow_tasks(session)


@pytest.mark.parametrize("case", CLI_CALLS, ids=lambda c: c.what)
async def test_bad_cli_arguments_get_a_clear_error(agent: Agent, case: bad_inputs.CliCall) -> None:
    session = await agent.start(bad_inputs.DELETE)
    await pending_items(session)
    address = agent.client.service_client.config.target_host
    if "not there" in case.what:
        address = "127.0.0.1:1"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "HITL_TASK_QUEUE": agent.task_queue}
    argv = [arg.replace("SESSION", session.id) for arg in case.argv]
    completed = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(ROOT / "starter.py"), *argv], capture_output=True, text=True, env=env, timeout=60
    )
    code, message = case.outcome.split(": ", 1)
    assert completed.returncode == int(code.removeprefix("exit ")), completed.stderr
    assert message.split("...")[0].strip() in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr
    assert len(await query(session, "pending")) == 1


async def test_oversized_payloads_are_refused_and_lose_nothing(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(tool_calls(("q", "ask_user_question", {"question": "Where from?"})))
    session = await agent.start("go")
    [item] = await pending_items(session)

    with pytest.raises(RPCError):
        await session.signal("user_message", {"text": "x" * 3_000_000})
    with pytest.raises(WorkflowUpdateFailedError) as long_message:
        await session.execute_update("user_message_update", {"text": "x" * 200_000})
    assert "text: String should have at most 100000 characters" in long_message.value.cause.message
    with pytest.raises(WorkflowUpdateFailedError) as long_answer:
        await session.execute_update("answer_update", {"answer": "x" * 200_000})
    assert "the answer is longer than 100000 characters" in long_answer.value.cause.message
    assert await query(session, "pending") == [item]

    fake.script(tool_calls(("h", "huge_report", {"megabytes": 3})), text("too big"))
    await session.execute_update("answer_update", {"answer": "Paris"})
    status = await settled(session)
    assert status["last_answer"] == "too big"
    report = fake.requests[-1]["messages"][-1]["content"]
    assert report.startswith("x" * 64_000) and report.endswith("[... 2936000 more characters cut]")
    await no_failed_workflow_tasks(session)


async def test_a_conversation_that_outgrows_a_request_is_trimmed_not_stuck(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(*[tool_calls((f"h{n}", "huge_report", {"megabytes": 1})) for n in range(8)], text("read it all"))
    session = await agent.start("go")
    status = await settled(session)
    assert status["last_answer"] == "read it all"
    last = json.dumps(fake.requests[-1]["messages"])
    assert len(last) < 400_000 and "was trimmed to keep the conversation" in last
    assert len(json.dumps(await query(session, "transcript"))) > 500_000, "the transcript keeps everything"
    await no_failed_workflow_tasks(session)
