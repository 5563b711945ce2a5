"""An MCP server (the SDK's MCPServer) asks a person during a tool call (MCP 2026-07-28 input_required):
the question is a pause of the session naming the server, and the answer reaches the server on the
retried call, whose result is the tool's."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.mcp import McpToolbox, parse_config
from activities.openai_backend import OpenAIBackend
from hitl.worker import build_worker
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.mcp_servers import answers_seen, asking_server, mcp_agent, tool_output, tool_results, worker_process
from tests.support.sessions import SECRET_KEY, Agent, at_rest, fast_forward, pending_items, pending_of_kind, query, refused_update, settled
from tests.support.stack import temporal_cli


async def test_a_form_question_is_a_pause_with_typed_fields_and_the_answer_completes_the_call(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    async with mcp_agent(env.client, workspace, {"diner": asking_server(tmp_path)}) as (agent, fake, _):
        fake.script(tool_calls(("b1", "mcp__diner__book_table", {"day": "friday"})), text("booked"))
        session = await agent.start("book a table for friday")
        [item] = await pending_items(session)
        assert item["kind"] == "question" and item["call_id"] == "b1~input1" and item["server"] == "diner"
        assert item["question"] == "Who is the table for?"
        assert item["because"] == "the MCP server diner asks a person"
        assert [(f["name"], f["type"]) for f in item["fields"]] == [("name", "string"), ("guests", "integer")]

        with pytest.raises(WorkflowUpdateFailedError):  # a typed field: the answer must fit
            await session.execute_update("answer_update", {"answer": {"name": "Ana", "guests": "many"}, "by": "ana"})
        await session.execute_update("answer_update", {"answer": {"name": "Ana", "guests": 3}, "by": "ana"})
        assert (await settled(session))["last_answer"] == "booked"
        assert answers_seen(tmp_path) == [{"tool": "book_table", "action": "accept", "content": {"name": "Ana", "guests": 3}}]
        assert tool_output(tool_results(fake)["b1"], "mcp__diner__book_table") == "booked friday for Ana, 3 guests"
        assert [e["event"] for e in await query(session, "audit") if e["call_id"] == "b1~input1"] == ["requested", "answered"]


async def test_a_declined_question_reaches_the_server_as_decline(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    async with mcp_agent(env.client, workspace, {"diner": asking_server(tmp_path)}) as (agent, fake, _):
        fake.script(tool_calls(("b1", "mcp__diner__book_table", {"day": "friday"})), text("not booked"))
        session = await agent.start("book a table for friday")
        await pending_items(session)
        await session.execute_update("reject_update", {"reason": "not telling", "by": "ana"})
        await settled(session)
        assert answers_seen(tmp_path) == [{"tool": "book_table", "action": "decline"}]
        assert tool_output(tool_results(fake)["b1"], "mcp__diner__book_table") == "not booked: the person answered decline"


async def test_a_url_question_shows_its_link_and_domain_and_done_retries_with_the_kept_state(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    async with mcp_agent(env.client, workspace, {"diner": asking_server(tmp_path)}) as (agent, fake, _):
        fake.script(tool_calls(("s1", "mcp__diner__sign_in", {})), text("signed in"))
        session = await agent.start("sign me in")
        [item] = await pending_items(session)
        assert item["url"] == "https://login.example.org/device?code=XY-42" and item["domain"] == "login.example.org"
        assert item["server"] == "diner" and item["choices"] == ["done"] and "login.example.org" in item["question"]
        await session.execute_update("answer_update", {"answer": "done", "by": "ana"})
        await settled(session)
        assert answers_seen(tmp_path) == [{"tool": "sign_in", "action": "accept", "request_state": "waiting-for-login"}]
        assert tool_output(tool_results(fake)["s1"], "mcp__diner__sign_in") == "signed in (accept)"


async def test_a_question_outlives_its_worker_and_the_answer_reaches_the_server_once(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """The worker is SIGKILLed (its stdio server dies with it) while the question waits; another
    worker, with a new server process, sends the answer with the kept requestState."""
    servers = {"diner": asking_server(tmp_path)}
    task_queue = f"hitl-mcp-{uuid.uuid4().hex[:8]}"
    with FakeOpenAI() as fake:
        fake.script(tool_calls(("b1", "mcp__diner__book_table", {"day": "friday"})), text("booked"))
        address = env.client.service_client.config.target_host
        with worker_process(address, task_queue, workspace, servers, fake, tmp_path) as worker:
            session = await Agent(env.client, task_queue, workspace).start("book a table for friday")
            [item] = await pending_items(session)
            assert item["call_id"] == "b1~input1" and item["server"] == "diner"
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=60)

        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async with McpToolbox(parse_config({"mcpServers": servers})):
            async with build_worker(env.client, task_queue, backend, workspace):
                [item] = await pending_items(session)  # still asked, by the new worker's replay
                assert item["call_id"] == "b1~input1" and item["question"] == "Who is the table for?"
                await session.execute_update("answer_update", {"answer": {"name": "Ana", "guests": 3}, "by": "ana"})
                assert (await settled(session))["last_answer"] == "booked"
    assert answers_seen(tmp_path) == [{"tool": "book_table", "action": "accept", "content": {"name": "Ana", "guests": 3}}]
    assert tool_output(tool_results(fake)["b1"], "mcp__diner__book_table") == "booked friday for Ana, 3 guests"


async def test_the_temporal_cli_answers_a_servers_question(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    async with mcp_agent(env.client, workspace, {"diner": asking_server(tmp_path)}) as (agent, fake, _):
        fake.script(tool_calls(("b1", "mcp__diner__book_table", {"day": "friday"})), text("booked"))
        session = await agent.start("book a table for friday")
        await pending_items(session)

        async def answer(answer: object) -> str:
            done = await asyncio.to_thread(
                temporal_cli, "workflow", "update", "execute", "--workflow-id", session.id, "--name", "answer_update",
                "--input", json.dumps({"answer": answer, "by": "cli-user"}),
                "--address", env.client.service_client.config.target_host)
            return done.stdout + done.stderr if done.returncode else "ok"

        assert "answer refused" in await answer({"name": "Ana", "guests": "many"})
        assert await answer({"name": "Ana", "guests": 3}) == "ok"
        assert (await settled(session))["last_answer"] == "booked"
        assert answers_seen(tmp_path) == [{"tool": "book_table", "action": "accept", "content": {"name": "Ana", "guests": 3}}]
        answered = [e for e in await query(session, "audit") if e["event"] == "answered"]
        assert [(e["call_id"], e["by"]) for e in answered] == [("b1~input1", "cli-user")], answered


async def test_an_older_servers_question_during_a_call_is_declined_with_the_reason(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """A 2025-11-25 server asks with elicitation/create while the call is open: no pause can hold the
    call, so the client declines and says why; the server goes on, and nobody is asked."""
    async with mcp_agent(env.client, workspace, {"old": asking_server(tmp_path, "--older")}) as (agent, fake, toolbox):
        fake.script(tool_calls(("r1", "mcp__old__remember_me", {})), text("not remembered"))
        session = await agent.start("remember me")
        assert (await settled(session))["last_answer"] == "not remembered"
        assert toolbox.connections["old"].protocol_version == "2025-11-25"
        [seen] = answers_seen(tmp_path)
        assert seen["tool"] == "remember_me" and "durable pause" in seen["error"], seen
        assert tool_output(tool_results(fake)["r1"], "mcp__old__remember_me") == f"not asked: {seen['error']}"
        assert await query(session, "pending") == []


async def test_a_question_answered_three_days_later_after_its_worker_was_killed_finishes_the_tool(
    skipping_env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """Three days of server time pass (time-skipping) while the question waits and no worker runs:
    the worker process was SIGKILLed once the session was only waiting. Another worker, with a new
    server process, sends the answer with the kept requestState (the server seals it for a week of
    its own clock), and the tool finishes with that answer.

    Killed any earlier (the question's `requested` notice, an activity, or the workflow task that
    reads its result still in flight), the server would not skip a second: a time-skipping server
    skips only while nothing is in flight, and that work waits for a worker this test starts only
    once the three days have passed."""
    servers = {"diner": asking_server(tmp_path)}
    task_queue = f"hitl-mcp-{uuid.uuid4().hex[:8]}"
    three_days = 3 * 86400
    with FakeOpenAI() as fake:
        fake.script(tool_calls(("b1", "mcp__diner__book_table", {"day": "friday"})), text("booked"))
        address = skipping_env.client.service_client.config.target_host
        with worker_process(address, task_queue, workspace, servers, fake, tmp_path) as worker:
            with skipping_env.with_time_skipping_disabled():  # time moves only when the test says
                session = await Agent(skipping_env.client, task_queue, workspace).start(
                    "book a table for friday", answer_timeout_seconds=7 * 86400)
            [item] = await pending_items(session)
            assert item["call_id"] == "b1~input1" and item["server"] == "diner"
            await at_rest(session)
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=60)

        assert await fast_forward(skipping_env, session, three_days)
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async with McpToolbox(parse_config({"mcpServers": servers})):
            async with build_worker(skipping_env.client, task_queue, backend, workspace):
                [item] = await pending_items(session)  # still asked, three days on
                assert item["call_id"] == "b1~input1" and item["question"] == "Who is the table for?"
                await session.execute_update("answer_update", {"answer": {"name": "Ana", "guests": 3}, "by": "ana"})
                assert (await settled(session))["last_answer"] == "booked"
                audit = {e["event"]: e["at"] for e in await query(session, "audit") if e["call_id"] == "b1~input1"}
    waited = datetime.fromisoformat(audit["answered"]) - datetime.fromisoformat(audit["requested"])
    assert waited >= timedelta(seconds=three_days), audit
    assert answers_seen(tmp_path) == [{"tool": "book_table", "action": "accept", "content": {"name": "Ana", "guests": 3}}]
    assert tool_output(tool_results(fake)["b1"], "mcp__diner__book_table") == "booked friday for Ana, 3 guests"


# The model names its calls: an id that already holds "~input" must not hide the call the question belongs to.
@pytest.mark.parametrize("call_id", ["b1", "b1~input"])
async def test_a_question_during_a_call_that_waited_for_approval_is_its_approvers_under_four_eyes(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path, call_id: str
) -> None:
    """The session gives book_table to ana and bob under four eyes; bob asks for it, ana approves.
    The server's question then decides that call: bob (who asked) may not answer it, carol (no
    approver) may not either; ana does."""
    async with mcp_agent(env.client, workspace, {"diner": asking_server(tmp_path)}) as (agent, fake, _):
        fake.script(tool_calls((call_id, "mcp__diner__book_table", {"day": "friday"})), text("booked"))
        session = await agent.start("book a table for friday", by="bob", participants=["carol"], four_eyes=True,
                                    require_approval=["mcp__diner__book_table"],
                                    approvers={"mcp__diner__book_table": ["ana", "bob"]})
        [call] = await pending_items(session)
        await session.execute_update("approve_update", {"call_id": call["call_id"], "by": "ana"})
        question = await pending_of_kind(session, "question")
        assert question["call_id"] == f"{call_id}~input1" and question.get("approvers") == ["ana", "bob"], question
        answer = {"call_id": f"{call_id}~input1", "answer": {"name": "Ana", "guests": 3}}
        assert "four-eyes" in await refused_update(session, "answer_update", {**answer, "by": "bob"})
        assert "carol may not decide" in await refused_update(session, "answer_update", {**answer, "by": "carol"})
        await session.execute_update("answer_update", {**answer, "by": "ana"})
        assert (await settled(session))["last_answer"] == "booked"
        assert answers_seen(tmp_path) == [{"tool": "book_table", "action": "accept", "content": {"name": "Ana", "guests": 3}}]


async def test_a_url_question_over_plain_http_is_refused_and_nobody_is_asked(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    async with mcp_agent(env.client, workspace, {"diner": asking_server(tmp_path, "--plain-http")}) as (agent, fake, _):
        fake.script(tool_calls(("s1", "mcp__diner__sign_in", {})), text("not signed in"))
        session = await agent.start("sign me in")
        assert (await settled(session))["last_answer"] == "not signed in"
        assert await query(session, "pending") == [] and answers_seen(tmp_path) == []
        assert "plain http URL" in tool_results(fake)["s1"] and "http://login.example.org/device" in tool_results(fake)["s1"]
