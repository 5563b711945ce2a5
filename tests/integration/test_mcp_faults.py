"""Crashes mid-call with a real MCP server: the session ends as expected and the commit
happens at most once per approval. MCP has no idempotency key, so a call that may have
reached the server is never sent again (activities/mcp/toolbox.py, docs/mcp.md)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from activities.mcp import McpToolbox, parse_config
from activities.mcp.connection import PING_EVERY_SECONDS, PING_TIMEOUT_SECONDS
from activities.openai_backend import OpenAIBackend
from tests.support.sessions import SECRET_KEY, Agent, pending_items, settled
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.mcp_servers import (
    block_commits, git_server, gone, kill, make_repo, mcp_agent, outer_pid, processes_running, subjects, tool_output, tool_results, wait_for_file,
    worker_process,
)
from hitl.worker import build_worker


async def test_a_server_killed_mid_call_is_not_called_again_and_is_restarted(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    inside, _release = block_commits(repo, tmp_path)
    async with mcp_agent(env.client, workspace, {"git": git_server(repo)}) as (agent, fake, toolbox):
        where = {"repo_path": str(repo)}
        fake.script(
            tool_calls(("commit", "mcp__git__git_commit", {**where, "message": "Add notes"})),
            tool_calls(("status", "mcp__git__git_status", where)),
            text("checked"),
        )
        session = await agent.start("commit my notes")
        await pending_items(session)
        await session.execute_update("approve_update", {})
        hook, server = map(int, (await wait_for_file(inside)).split())
        hook, server = outer_pid(hook, "pre-commit"), outer_pid(server, "mcp_server_git")
        kill(server)  # the server dies in the middle of git_commit
        kill(hook)

        status = await settled(session)
        assert status["last_answer"] == "checked" and status["error"] is None
        result = tool_results(fake, 1)["commit"]
        assert "may or may not have taken effect" in result and "not sent again" in result
        # The restarted server answered the next call.
        assert "Changes to be committed" in tool_results(fake)["status"]
        assert toolbox.connections["git"].sessions_opened == 2
        assert subjects(repo) == ["first commit"] and len(inside.read_text().splitlines()) == 1
        assert processes_running(str(repo)) and server not in processes_running(str(repo))
    assert await gone(str(repo)), "the worker stopped and left its stdio server running"


async def test_a_worker_killed_mid_call_leaves_no_server_behind_and_the_commit_happens_once(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    inside, release = block_commits(repo, tmp_path)
    servers = {"git": git_server(repo)}
    task_queue = f"hitl-mcp-{uuid.uuid4().hex[:8]}"
    where = {"repo_path": str(repo)}
    with FakeOpenAI() as fake:
        fake.script(tool_calls(("commit", "mcp__git__git_commit", {**where, "message": "Add notes"})), text("checked"))
        address = env.client.service_client.config.target_host
        with worker_process(address, task_queue, workspace, servers, fake, tmp_path) as worker:
            session = await Agent(env.client, task_queue, workspace).start("commit my notes")
            await pending_items(session)
            await session.execute_update("approve_update", {})
            await wait_for_file(inside)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
        # The sandboxed server dies with its worker (bwrap --die-with-parent), inside the commit it was in.
        release.touch()
        assert await gone(str(repo)), "a stdio server outlived its SIGKILLed worker"
        assert subjects(repo) == ["first commit"]

        # Another worker takes the call over (after the heartbeat timeout): it is not sent again.
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async with McpToolbox(parse_config({"mcpServers": servers})):
            async with build_worker(env.client, task_queue, backend, workspace):
                status = await settled(session)
    assert status["last_answer"] == "checked"
    assert "may or may not have taken effect" in tool_results(fake)["commit"]
    assert subjects(repo) == ["first commit"] and len(inside.read_text().splitlines()) == 1
    assert await gone(str(repo))


async def test_a_slow_call_on_a_busy_stdio_server_is_not_taken_for_a_dead_one(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    """mcp-server-git answers nothing, pings included, while a commit hook runs; the call is
    left to finish rather than the server restarted under it."""
    repo = make_repo(tmp_path)
    inside, release = block_commits(repo, tmp_path)
    async with mcp_agent(env.client, workspace, {"git": git_server(repo)}) as (agent, fake, toolbox):
        fake.script(tool_calls(("commit", "mcp__git__git_commit", {"repo_path": str(repo), "message": "Slow"})), text("ok"))
        session = await agent.start("commit")
        await pending_items(session)
        await session.execute_update("approve_update", {})
        await wait_for_file(inside)
        await asyncio.sleep(PING_EVERY_SECONDS + PING_TIMEOUT_SECONDS + 2)
        release.touch()
        await settled(session)
        assert tool_output(tool_results(fake)["commit"], "mcp__git__git_commit").startswith("Changes committed successfully")
        assert subjects(repo) == ["Slow", "first commit"] and toolbox.connections["git"].sessions_opened == 1
