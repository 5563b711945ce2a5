"""mcp-server-git (PyPI, nobody here wrote it) on a repository the test makes: read-only
tools run without asking, git_commit waits for a person, and the repository shows exactly
what was approved."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from activities.tools import CATALOG
from hitl.console.render import describe_item
from tests.support.sessions import pending_items, query, refused_update, settled
from tests.support.fake_openai import text, tool_calls
from tests.support.mcp_servers import git_server, make_repo, mcp_agent, subjects, tool_output, tool_results
from tests.support.replaying import worker_replayer


async def test_read_only_tools_run_and_a_commit_runs_once_when_approved(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    async with mcp_agent(env.client, workspace, {"git": git_server(repo)}) as (agent, fake, toolbox):
        where = {"repo_path": str(repo)}
        fake.script(
            tool_calls(("status", "mcp__git__git_status", where), ("log", "mcp__git__git_log", where)),
            tool_calls(("commit", "mcp__git__git_commit", {**where, "message": "Add notes"})),
            text("committed"),
        )
        session = await agent.start("commit my notes")
        [item] = await pending_items(session)
        # git_status and git_log ran without anyone asked; only the commit waits.
        assert item["call_id"] == "commit" and item["tool"] == "mcp__git__git_commit" and item["kind"] == "approval"
        assert "destructive" not in item  # the server does not mark git_commit destructive
        first = tool_results(fake, 1)
        assert "Changes to be committed" in first["status"] and "notes.txt" in first["status"]
        assert "first commit" in first["log"]
        assert subjects(repo) == ["first commit"]

        await session.execute_update("approve_update", {"by": "ana"})
        status = await settled(session)
        assert status["last_answer"] == "committed"
        assert subjects(repo) == ["Add notes", "first commit"]
        assert tool_output(tool_results(fake)["commit"], "mcp__git__git_commit").startswith("Changes committed successfully")
        assert [e["event"] for e in await query(session, "audit") if e["tool"] == "mcp__git__git_commit"] == ["requested", "approved"]
        assert toolbox.connections["git"].sessions_opened == 1  # one server process served every call


async def test_a_rejected_commit_does_not_run_and_edited_arguments_must_fit_the_schema(
    env: WorkflowEnvironment, workspace: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    async with mcp_agent(env.client, workspace, {"git": git_server(repo)}) as (agent, fake, _):
        where = {"repo_path": str(repo)}
        fake.script(
            tool_calls(("c1", "mcp__git__git_commit", {**where, "message": "wip"})),
            tool_calls(("c2", "mcp__git__git_commit", {**where, "message": "wip again"}),
                       ("reset", "mcp__git__git_reset", where)),
            text("done"),
        )
        session = await agent.start("commit")
        await pending_items(session)
        await session.execute_update("reject_update", {"reason": "say what it is"})

        items = await pending_items(session, 2)
        assert {i["call_id"]: i.get("destructive") for i in items} == {"c2": None, "reset": True}
        assert "DESTRUCTIVE" in describe_item(next(i for i in items if i["call_id"] == "reset"))
        # Edited arguments are checked against the tool's own JSON schema, as for built-in tools.
        reason = await refused_update(session, "approve_update", {"call_id": "c2", "args": where})
        assert "edited args do not fit mcp__git__git_commit" in reason and "'message' is a required property" in reason
        reason = await refused_update(session, "approve_update", {"call_id": "c2", "args": {**where, "message": 7}})
        assert "message: 7 is not of type 'string'" in reason
        await session.execute_update("approve_update", {"call_id": "c2", "args": {**where, "message": "Add notes"}})
        await session.execute_update("reject_update", {"call_id": "reset"})
        await settled(session)

        assert subjects(repo) == ["Add notes", "first commit"]  # the edited commit, once; nothing rejected ran
        assert tool_results(fake, 1)["c1"].startswith("Rejected by a person")
        results = tool_results(fake)
        assert "edited the arguments" in results["c2"] and results["reset"].startswith("Rejected")


async def test_the_server_entry_overrides_the_annotations(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    entry = git_server(repo, auto_approve=["git_commit"], require_approval=["mcp__git__git_status"])
    async with mcp_agent(env.client, workspace, {"git": entry}) as (agent, fake, _):
        assert CATALOG.get("mcp__git__git_commit").policy() == "runs without asking (auto_approve of MCP server git)"
        where = {"repo_path": str(repo)}
        fake.script(
            tool_calls(("commit", "mcp__git__git_commit", {**where, "message": "auto"}),
                       ("status", "mcp__git__git_status", where)),
            text("ok"),
        )
        session = await agent.start("go")
        [item] = await pending_items(session)
        assert item["call_id"] == "status"
        await session.execute_update("reject_update", {})
        await settled(session)
        assert subjects(repo) == ["auto", "first commit"]
        audit = await query(session, "audit")
        assert {"event": "auto_approved", "rule": "auto_approve of MCP server git"}.items() <= next(
            e for e in audit if e["call_id"] == "commit").items()


async def test_sessions_replay_after_the_server_and_its_tools_are_gone(env: WorkflowEnvironment, workspace: Path, tmp_path: Path) -> None:
    """What a session may call, and how edited arguments were checked, is recorded in its history:
    replaying it needs neither the server nor the same tool list."""
    repo = make_repo(tmp_path)
    async with mcp_agent(env.client, workspace, {"git": git_server(repo)}) as (agent, fake, _):
        where = {"repo_path": str(repo)}
        fake.script(tool_calls(("commit", "mcp__git__git_commit", {**where, "message": "draft"})), text("ok"))
        session = await agent.start("commit")
        await pending_items(session)
        # A signal (replayed, unlike an Update validator) with edited arguments, and one that does not fit.
        await session.signal("approve", {"args": {**where, "message": 1}})
        await session.signal("approve", {"args": {**where, "message": "Final"}})
        await settled(session)
        assert subjects(repo) == ["Final", "first commit"]
        assert any("edited args do not fit" in str(s.get("reason")) for s in (await query(session, "status"))["ignored_signals"])
        history = await session.fetch_history()
    assert CATALOG.get("mcp__git__git_commit") is None  # the toolbox took its tools out when it closed
    replayer = worker_replayer()
    result = await replayer.replay_workflow(WorkflowHistory.from_json(session.id, history.to_json()), raise_on_replay_failure=False)
    assert result.replay_failure is None
