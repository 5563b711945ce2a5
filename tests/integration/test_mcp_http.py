"""A second real server, mcp-server-time, reached over streamable HTTP next to the stdio git
server: its read-only tools run without asking, a changed tool list reaches new sessions (and
running ones at their next model call),
and a server that stays down is a clear error for the model, not a stuck session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.mcp import toolbox
from activities.tools import CATALOG
from tests.support.sessions import eventually, pending_items, query, settled
from tests.support.fake_openai import text, tool_calls
from tests.support.mcp_servers import TimeOverHttp, git_server, make_repo, mcp_agent, tool_output, tool_results


async def test_two_servers_one_over_streamable_http(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    async with TimeOverHttp() as time_server:
        servers = {"git": git_server(repo), "time": {"url": time_server.url, "trusted": True}}
        async with mcp_agent(env.client, workspace, servers) as (agent, fake, mcp):
            assert mcp.describe() == ["git (stdio, trusted, sandboxed): 12 tools", "time (streamable HTTP, trusted): 2 tools"]
            fake.script(
                tool_calls(("now", "mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
                           ("add", "mcp__git__git_add", {"repo_path": str(repo), "files": ["README"]})),
                text("it is late"),
            )
            session = await agent.start("what time is it in Paris?")
            [item] = await pending_items(session)
            assert item["tool"] == "mcp__git__git_add"  # not read-only: it asks; get_current_time did not
            await session.execute_update("reject_update", {})
            await settled(session)
            now = json.loads(tool_output(tool_results(fake)["now"], "mcp__time__get_current_time"))
            assert now["timezone"] == "Europe/Paris" and now["datetime"].endswith("+01:00")


async def test_a_changed_tool_list_reaches_new_sessions(env: WorkflowEnvironment, workspace: Path) -> None:
    async with TimeOverHttp() as time_server:
        time_server.hidden.add("convert_time")
        async with mcp_agent(env.client, workspace, {"time": {"url": time_server.url, "trusted": True}}) as (agent, fake, _):
            fake.script(text("hello"), text("hello again"), text("and again"))
            before = await agent.start("hi")
            await settled(before)
            assert "mcp__time__convert_time" not in (await query(before, "status"))["tools"]

            time_server.hidden.clear()
            await time_server.announce_change()  # notifications/tools/list_changed
            await eventually(lambda: _async(CATALOG.get("mcp__time__convert_time")), lambda spec: spec is not None)
            after = await agent.start("hi")
            await settled(after)
            offered = [tool["function"]["name"] for tool in fake.requests[-1]["tools"]]
            assert "mcp__time__convert_time" in offered and "mcp__time__get_current_time" in offered
            # The session started before the change offers it from its next model call on.
            await before.execute_update("user_message_update", {"text": "and now?"})
            await settled(before)
            assert "mcp__time__convert_time" in [tool["function"]["name"] for tool in fake.requests[-1]["tools"]]


async def test_a_server_that_stays_down_is_an_error_the_model_reads(
    env: WorkflowEnvironment, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(toolbox, "READY_WAIT_SECONDS", 1.0)
    async with TimeOverHttp() as time_server:
        async with mcp_agent(env.client, workspace, {"time": {"url": time_server.url, "trusted": True}}) as (agent, fake, _):
            await time_server.stop()  # the server goes away for good
            fake.script(tool_calls(("now", "mcp__time__get_current_time", {"timezone": "UTC"})), text("sorry"))
            session = await agent.start("what time is it?")
            status = await settled(session)
            assert status["last_answer"] == "sorry"
            result = tool_results(fake)["now"]
            assert result.startswith("Error: mcp__time__get_current_time failed: the MCP server 'time' is not reachable")


async def _async(value: object) -> object:
    return value
