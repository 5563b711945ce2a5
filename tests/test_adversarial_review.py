"""Inputs found by an adversarial review that wedged a session: each must leave it healthy.

A failed workflow task is retried for ever, and an Update slot held for ever keeps every
person's decision out: both strand a session as surely as a crash would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowUpdateStage

from catalog import CATALOG, SchemaToolSpec, ToolContext
from console.inbox import read_inbox
from tests.conftest import Agent, eventually, pending_items, query, settled
from tests.fake_openai import FakeOpenAI, text, tool_calls
from tests.session_health import assert_healthy


async def test_many_approvers_do_not_fail_the_search_attribute_upsert(agent: Agent) -> None:
    """Temporal refuses a search attribute value over 2 KB by failing the workflow task; thirty
    approvers with long names (any API caller may start such a session) made HitlApprovers one."""
    people = [f"approver-{n:02d}@" + "department.example.org" * 4 for n in range(30)]
    session = await agent.start("please delete notes.txt", approvers={"delete_file": people})
    [item] = await pending_items(session)
    await eventually(lambda: query(session, "status"), lambda status: status["state"] == "awaiting_human")
    await asyncio.sleep(1)  # the upsert's workflow task has completed (or failed)
    await assert_healthy(session)

    async def inbox_of(person: str) -> list[Any]:
        return (await read_inbox(agent.client, task_queue=agent.task_queue, person=person)).items

    [row] = await eventually(lambda: inbox_of(people[-1]), lambda items: len(items) == 1)
    assert row.call_id == item["call_id"] and row.approvers == people
    assert await inbox_of("mallory") == []  # listed for everyone by visibility, kept from those who may not decide


async def test_callers_that_wait_for_ever_do_not_keep_decisions_out(agent: Agent) -> None:
    """Temporal admits ten Updates in flight per workflow: ten `wait_until_settled` for an event
    that never comes (anyone who reaches the frontend may send them) refused every API decision."""
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)
    waiting = [
        await session.start_update("wait_until_settled", {"after_event": 10**15},
                                   wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        for _ in range(10)
    ]
    decided = await asyncio.wait_for(session.execute_update("approve_update", {"call_id": item["call_id"]}), 30)
    assert decided["outcome"] == "approved"
    await settled(session)
    for oldest in waiting[:-4]:  # answered as newer ones came; the newest four wait on
        assert (await asyncio.wait_for(oldest.result(), 10))["status"]["state"] == "awaiting_human"
    assert not (agent.workspace / "notes.txt").exists()
    await assert_healthy(session)


async def test_an_edit_against_a_backtracking_schema_regex_does_not_fail_the_workflow_task(
    openai_agent: tuple[Agent, FakeOpenAI],
) -> None:
    """An MCP server's schema may hold a regex that backtracks for seconds on a short string. The
    workflow checked a person's edited arguments with it: the deadlock detector failed every
    workflow task. The workflow leaves regexes to the tool activity, which refuses the edit."""
    agent, fake = openai_agent
    ran: list[dict[str, Any]] = []

    async def run(args: dict[str, Any], context: ToolContext) -> str:
        ran.append(args)
        return "tagged"

    CATALOG.add(SchemaToolSpec(
        name="mcp__review__tag", description="tag a release", needs_approval=True, runner=run,
        input_schema={"type": "object", "properties": {"tag": {"type": "string", "pattern": "^(a+)+$"}},
                      "required": ["tag"]},
    ))
    try:
        fake.script(tool_calls(("c1", "mcp__review__tag", {"tag": "aaa"})), text("could not tag"))
        session = await agent.start("tag it")
        [item] = await pending_items(session)
        await session.signal("approve", {"call_id": item["call_id"], "args": {"tag": "a" * 26 + "!"}})
        await eventually(lambda: query(session, "status"), lambda status: status["state"] == "idle", timeout=60)
        answers = await assert_healthy(session)
    finally:
        CATALOG.remove("mcp__review__tag")
    assert ran == []
    [result] = [m["content"] for m in answers["transcript"] if m["role"] == "tool"]
    assert "does not match" in result, result
