"""Every entry of the bad-input catalogue (tests/support/bad_inputs.py), against a real server.

Each check ends by confirming the session still works: no workflow task failed
in any of its runs, its queries answer, and a call that is pending (or the next
one it asks for) can still be decided.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.workflowservice.v1 import SignalWorkflowExecutionRequest
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from tests.support import bad_inputs, example_tools  # noqa: F401  (example_tools registers huge_report)
from tests.support.bad_inputs import AFTER_SETTLING, CLI_CALLS, DECISIONS, MODEL_REPLIES, SESSION_STARTS, TOOL_FAILURES, WEDGES
from tests.support.sessions import PATIENCE, Agent, eventually, pending_items, query, running_agent, settled, without_rpc_retries
from tests.support.fake_openai import FakeOpenAI, Reply, completion, error, text, tool_calls
from tests.support.session_health import (
    assert_healthy,
    assert_no_failed_workflow_task,
    can_still_decide,
    how_it_ended,
    is_settled,
    raw_json,
    runs_of,
    wait_for_status,
)
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "bad-inputs.md"


def test_the_catalogue_has_at_least_forty_entries_and_its_page_is_current() -> None:
    page = bad_inputs.render()
    assert page.count("\n| ") - 1 >= 40
    assert DOC.read_text() == page, "run: python -m tests.support.bad_inputs > docs/bad-inputs.md"


async def refused_both_ways(
    session: WorkflowHandle[Any, Any], verb: str, payload: Any, reason: str, reason_at_most: int = 20_000
) -> None:
    """The Update is rejected with the reason; the signal is ignored and recorded with it.
    Neither repeats a caller's megabytes back: the reason has a bound."""
    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await asyncio.wait_for(session.execute_update(f"{verb}_update", payload), 60 * PATIENCE)
    assert reason in failure.value.cause.message
    assert len(failure.value.cause.message) <= reason_at_most
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
    await can_still_decide(session, agent.workspace)


@pytest.mark.parametrize("case", AFTER_SETTLING, ids=lambda c: c.what)
async def test_decisions_after_settling_are_refused(agent: Agent, case: bad_inputs.SettledDecision) -> None:
    session = await agent.start(bad_inputs.DELETE)
    await pending_items(session)
    await session.execute_update("approve_update", {})
    await settled(session)
    await refused_both_ways(session, case.verb, case.payload, case.reason)
    await can_still_decide(session, agent.workspace)


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
    await assert_healthy(session)


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
    await assert_healthy(session)


@pytest.mark.parametrize("case", SESSION_STARTS, ids=lambda c: c.what)
async def test_bad_session_input_fails_the_start_with_the_reason(agent: Agent, case: bad_inputs.SessionStart) -> None:
    session = await agent.client.start_workflow("AgentWorkflow", case.input, id=f"bad-{abs(hash(case.what))}", task_queue=agent.task_queue)
    with pytest.raises(WorkflowFailureError) as failure:
        await session.result()
    expected = case.outcome.split("invalid session input", 1)[1].split("...")[0]
    assert failure.value.cause.message.startswith("invalid session input")
    assert expected.strip(": ") in failure.value.cause.message
    await assert_no_failed_workflow_task(session)


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
    await can_still_decide(session, agent.workspace)


async def test_oversized_payloads_are_refused_and_lose_nothing(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(tool_calls(("q", "ask_user_question", {"question": "Where from?"})))
    session = await agent.start("go")
    [item] = await pending_items(session)

    with pytest.raises(RPCError):
        await session.signal("user_message", {"text": "x" * 3_000_000})
    with pytest.raises(WorkflowUpdateFailedError) as long_message:
        await session.execute_update("user_message_update", {"text": "x" * 200_000})
    assert "text: Value error, is 200000 bytes; at most 100000 are accepted" in long_message.value.cause.message
    with pytest.raises(WorkflowUpdateFailedError) as long_answer:
        await session.execute_update("answer_update", {"answer": "x" * 200_000})
    assert "is 200002 bytes as JSON; at most 100000 are accepted" in long_answer.value.cause.message
    assert await query(session, "pending") == [item]

    fake.script(tool_calls(("h", "huge_report", {"megabytes": 3})), text("too big"))
    await session.execute_update("answer_update", {"answer": "Paris"})
    status = await settled(session)
    assert status["last_answer"] == "too big"
    report = fake.requests[-1]["messages"][-1]["content"]
    assert len(report.encode()) <= 64_000 and report.startswith("x" * 63_000) and report.endswith("more bytes cut]")
    await assert_healthy(session)


async def test_a_conversation_that_outgrows_a_request_is_trimmed_not_stuck(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(*[tool_calls((f"h{n}", "huge_report", {"megabytes": 1})) for n in range(8)], text("read it all"))
    session = await agent.start("go")
    status = await settled(session)
    assert status["last_answer"] == "read it all"
    last = json.dumps(fake.requests[-1]["messages"])
    assert len(last) < 400_000 and "was trimmed to keep the conversation" in last
    assert len(json.dumps(await query(session, "transcript"))) > 500_000, "the transcript keeps everything"
    await assert_healthy(session)


# ------------------------------------------------------------ inputs that once wedged a session (issue 7)


async def start_raw(agent: Agent, start_input: Any, **options: Any) -> WorkflowHandle[Any, Any]:
    """Start a session with its input as JSON text, so `Infinity` goes through as written."""
    return await agent.client.start_workflow(
        "AgentWorkflow", raw_json(json.dumps(start_input)), id=f"wedge-{uuid.uuid4().hex[:10]}",
        task_queue=agent.task_queue, **options,
    )


async def refused_start(session: WorkflowHandle[Any, Any], timeout: float = 60) -> str:
    """The reason a start was refused; fails if the session runs on, or a workflow task failed."""
    timeout *= PATIENCE
    deadline = asyncio.get_running_loop().time() + timeout
    while (await session.describe()).status == WorkflowExecutionStatus.RUNNING:
        await assert_no_failed_workflow_task(session)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the start was not refused within {timeout}s: {await query(session, 'status')}")
        await asyncio.sleep(0.2)
    with pytest.raises(WorkflowFailureError) as failure:
        await session.result()
    await assert_no_failed_workflow_task(session)
    return failure.value.cause.message


def payload_of(detail: dict[str, Any]) -> Any:
    return raw_json(detail["raw"]) if "raw" in detail else detail["payload"]


async def check_start_refused(agent: Agent, detail: dict[str, Any]) -> None:
    reason = await refused_start(await start_raw(agent, detail["input"]))
    assert reason.startswith("invalid session input"), reason
    assert detail["field"] in reason, reason


async def check_forged_carried(agent: Agent, detail: dict[str, Any]) -> None:
    session = await start_raw(agent, detail["input"])
    reason = await refused_start(session)
    assert reason.startswith("invalid session input") and "carried" in reason, reason
    assert (agent.workspace / "notes.txt").exists(), "a forged grant ran delete_file with no decision"


async def check_decision_refused(agent: Agent, detail: dict[str, Any]) -> None:
    session = await agent.start(bad_inputs.DELETE)
    before = await pending_items(session)
    await refused_both_ways(session, detail["verb"], payload_of(detail), detail["field"], detail.get("reason_at_most", 20_000))
    assert await query(session, "pending") == before, "a refused decision changes nothing"
    await assert_healthy(session)
    await can_still_decide(session, agent.workspace)


async def check_repeated_refusals(agent: Agent, detail: dict[str, Any]) -> None:
    session = await agent.start(bad_inputs.DELETE, continue_as_new_after_events=20)
    await pending_items(session)
    for _ in range(detail["times"]):
        await session.signal(detail["verb"], detail["payload"])
    status = await wait_for_status(session, lambda s: len(s["ignored_signals"]) >= detail["times"])
    assert len(json.dumps(status)) < 100_000, "what a refusal records is clipped"
    runs = len(await runs_of(agent.client, session.id, session.first_execution_run_id))
    await can_still_decide(session, agent.workspace)
    await wait_for_status(session, is_settled)
    await eventually(lambda: runs_of(agent.client, session.id, session.first_execution_run_id), lambda r: len(r) > runs)
    await can_still_decide(session, agent.workspace)


async def check_refusal_flood(agent: Agent, detail: dict[str, Any]) -> None:
    session = await agent.start(bad_inputs.DELETE)
    before = await pending_items(session)
    for sent in range(1, detail["times"] + 1):  # each once the last was refused, as a retrying client would
        try:
            await session.signal(detail["verb"], detail["payload"])
        except RPCError as error:
            raise AssertionError(f"signal {sent} was refused ({error}): {await how_it_ended(agent.client, session.id)}") from None
        await wait_for_status(session, lambda s, sent=sent: len(s["ignored_signals"]) >= min(sent, 50))
    runs = await runs_of(agent.client, session.id, session.first_execution_run_id)
    assert len(runs) > 1, "the session never continued as new"
    assert (await session.describe()).status == WorkflowExecutionStatus.RUNNING
    assert [p["call_id"] for p in await query(session, "pending")] == [p["call_id"] for p in before]
    await can_still_decide(session, agent.workspace)


async def check_update_over_limit(agent: Agent, detail: dict[str, Any]) -> None:
    session = await agent.start(bad_inputs.DELETE)
    before = await pending_items(session)
    unretried = (await without_rpc_retries(agent.client)).get_workflow_handle(session.id)
    with pytest.raises(RPCError, match="in-flight updates"):
        await asyncio.wait_for(unretried.execute_update(f"{detail['verb']}_update", detail["payload"]), 120)
    await assert_healthy(session)
    assert await query(session, "pending") == before
    await can_still_decide(session, agent.workspace)


async def check_unknown_encoding(agent: Agent, detail: dict[str, Any]) -> None:
    session = await agent.start(bad_inputs.DELETE)
    before = await pending_items(session)
    for verb in detail["verbs"]:
        await agent.client.workflow_service.signal_workflow_execution(SignalWorkflowExecutionRequest(
            namespace=agent.client.namespace, workflow_execution=WorkflowExecution(workflow_id=session.id),
            signal_name=verb, identity="bad-input-catalogue",
            input=Payloads(payloads=[Payload(metadata={"encoding": b"binary/unknown"}, data=b"\x00\xff")]),
        ))
    status = await wait_for_status(session, lambda s: len(s["ignored_signals"]) >= len(detail["verbs"]), timeout=20)
    assert [i["signal"] for i in status["ignored_signals"]] == detail["verbs"]
    assert await query(session, "pending") == before
    await can_still_decide(session, agent.workspace)


async def check_big_messages(agent: Agent, detail: dict[str, Any]) -> None:
    session = await agent.start("search for milk", continue_as_new_after_events=20)
    await wait_for_status(session, is_settled)
    runs = len(await runs_of(agent.client, session.id, session.first_execution_run_id))
    for turn in range(detail["count"]):
        await session.signal("user_message", {"text": detail["text"]})
        if detail["accepted"]:  # one turn each: messages queued together have a bound of their own
            await wait_for_status(session, lambda s: is_settled(s) and s["turn"] >= turn + 2, timeout=60)
    if detail["accepted"]:
        status = await wait_for_status(session, is_settled)
        assert not status["ignored_signals"], status["ignored_signals"]
    else:
        status = await wait_for_status(session, lambda s: len(s["ignored_signals"]) >= detail["count"])
        assert all("text" in i["reason"] for i in status["ignored_signals"]), status["ignored_signals"]
    await can_still_decide(session, agent.workspace)
    await wait_for_status(session, is_settled)
    await eventually(lambda: runs_of(agent.client, session.id, session.first_execution_run_id), lambda r: len(r) > runs)
    await can_still_decide(session, agent.workspace)


class HugeToolCallModel(OfflineModel):
    """The offline model, but its first replies each call a tool with one enormous part:
    its arguments (search_web's query), its name (a tool that does not exist) or its id."""

    def __init__(self, replies: int, size: int, part: str) -> None:
        self.left, self.size, self.part = replies, size, part

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self.left <= 0:
            return await super().complete(request)
        self.left -= 1
        name, call_id, query = "search_web", f"big{self.left}", "milk"
        if self.part == "arguments":
            query += " " + "x" * self.size
        elif self.part == "name":
            name = "n" * self.size
        else:
            call_id += "i" * self.size
        call = ToolCall(id=call_id, function=FunctionCall(name=name, arguments=json.dumps({"query": query})))
        return ModelReply(tool_calls=[call])


async def check_huge_tool_calls(env: WorkflowEnvironment, workspace: Path, detail: dict[str, Any]) -> None:
    model = HugeToolCallModel(detail["replies"], detail["size"], detail["part"])
    async for agent in running_agent(env.client, workspace, model):
        session = await agent.start("search for milk")
        await wait_for_status(session, is_settled, timeout=120)
        assert model.left == 0, "every scripted reply was asked for"
        await can_still_decide(session, agent.workspace)


async def check_four_eyes_grant(agent: Agent, detail: dict[str, Any]) -> None:
    (agent.workspace / "b.txt").write_text("bob's\n")
    session = await agent.start(bad_inputs.DELETE, **detail["options"])
    await pending_items(session)
    await session.execute_update("approve_update", {"by": "bob", "remember": {"scope": "tool", "for_seconds": 3600}})
    await wait_for_status(session, is_settled)
    await session.signal("user_message", {"text": "please delete b.txt", "by": "bob"})
    await wait_for_status(session, lambda s: s["pending"] > 0 or is_settled(s))
    audit = await query(session, "audit")
    assert (agent.workspace / "b.txt").exists(), f"bob's own request ran on bob's own grant: {audit}"
    [item] = await query(session, "pending")
    assert item["requested_by"] == "bob"
    await session.execute_update("approve_update", {"call_id": item["call_id"], "by": "alice"})
    await wait_for_status(session, is_settled)
    assert not (agent.workspace / "b.txt").exists()
    await assert_healthy(session)


async def check_rules_hold(agent: Agent, detail: dict[str, Any]) -> None:
    """A rule the session cannot apply must not be accepted and then silently ignored."""
    session = await start_raw(agent, {"message": bad_inputs.DELETE, **detail["options"]})
    while not await query(session, "pending"):
        if (await session.describe()).status == WorkflowExecutionStatus.FAILED:
            reason = await refused_start(session)
            assert reason.startswith("invalid session input"), reason
            return
        await assert_no_failed_workflow_task(session)
        await asyncio.sleep(0.2)
    [item] = await query(session, "pending")
    await session.signal("approve", {"call_id": item["call_id"], "by": "mallory"})
    await asyncio.sleep(1)
    assert (agent.workspace / "notes.txt").exists(), f"one approval by anyone ran it: {await query(session, 'audit')}"
    await can_still_decide(session, agent.workspace)


async def check_cancel_then_approve(agent: Agent, detail: dict[str, Any]) -> None:
    sessions = [await agent.start(bad_inputs.DELETE) for _ in range(detail["sessions"])]
    items = [(await pending_items(session))[0] for session in sessions]
    for session, item in zip(sessions, items):  # back to back, as one client would
        await session.signal("cancel", {"reason": "stop"})
        try:
            await session.signal("approve", {"call_id": item["call_id"]})
        except RPCError as error:  # the session may already have closed: then nothing can be approved anyway
            assert "already completed" in error.message, error
    by_update = await agent.start(bad_inputs.DELETE)
    [item] = await pending_items(by_update)
    await by_update.execute_update("cancel_update", {"reason": "stop"})
    with pytest.raises((WorkflowUpdateFailedError, RPCError)):
        await by_update.execute_update("approve_update", {"call_id": item["call_id"]})
    for session in [*sessions, by_update]:
        status = await wait_for_status(session, lambda s: s["state"] == "closed")
        assert status["pending"] == 0
        events = [e["event"] for e in await query(session, "audit")]
        assert "approved" not in events, events
        await assert_healthy(session)
    assert (agent.workspace / "notes.txt").exists(), "an approve after cancel ran the tool"


@pytest.mark.parametrize("case", WEDGES, ids=lambda c: c.what)
async def test_an_input_that_once_wedged_a_session_is_refused_or_survived(
    env: WorkflowEnvironment, workspace: Path, case: bad_inputs.Wedge
) -> None:
    if case.scenario == "huge_tool_calls":
        await check_huge_tool_calls(env, workspace, case.detail)
        return
    checks = {
        "start_refused": check_start_refused, "forged_carried": check_forged_carried,
        "decision_refused": check_decision_refused, "repeated_refusals": check_repeated_refusals,
        "refusal_flood": check_refusal_flood, "update_over_limit": check_update_over_limit,
        "unknown_encoding": check_unknown_encoding, "big_messages": check_big_messages,
        "cancel_then_approve": check_cancel_then_approve, "four_eyes_grant": check_four_eyes_grant,
        "rules_hold": check_rules_hold,
    }
    async for agent in running_agent(env.client, workspace):
        await checks[case.scenario](agent, case.detail)
