"""An MCP server (the SDK's MCPServer) asks a person during a tool call (MCP 2026-07-28 input_required):
the question is a pause of the session naming the server, and the answer reaches the server on the
retried call, whose result is the tool's."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from tests.support.fake_openai import text, tool_calls
from tests.support.mcp_servers import answers_seen, asking_server, mcp_agent, tool_output, tool_results
from tests.support.sessions import pending_items, query, settled


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
