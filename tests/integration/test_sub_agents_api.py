"""Sub-agents through the HTTP API: a child's call, listed by its root, is decided at the root's
URL, by the people of the root, with a proof the API signs for the child (its session and call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import AsyncIterator
from urllib.parse import quote

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.integration.test_cli import starter
from tests.integration.test_sub_agents import JANITOR, DelegatingModel
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (a fixture)
from tests.support.sessions import eventually, running_agent


@pytest.fixture
async def delegating_api(env: WorkflowEnvironment, workspace: Path, signing_key: str) -> AsyncIterator[Api]:
    async for agent in running_agent(env.client, workspace, DelegatingModel()):
        async with serving(agent) as running:
            yield running


async def test_a_child_call_is_decided_at_its_root_through_the_api(delegating_api: Api) -> None:
    started = await delegating_api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR},
                                         participants=["bob"])
    root = started["session_id"]
    async with delegating_api.as_("ana") as ana:
        listed = await eventually(lambda: ana.get(f"/sessions/{root}/pending"), lambda answer: bool(answer.json()))
        [item] = listed.json()
        assert (item["path"], item["session_id"], item["tool"]) == (["janitor"], f"{root}/janitor/1", "delete_file")
        async with delegating_api.as_("carol") as carol:  # not of the root's people: not even told it exists
            assert (await carol.post(f"/sessions/{root}/calls/{quote(item['call_id'], safe='')}/approve",
                                     json={})).status_code == 404
        approved = await ana.post(f"/sessions/{root}/calls/{quote(item['call_id'], safe='')}/approve", json={})
        assert approved.status_code == 200, approved.text
        assert approved.json()["outcome"] == "approved" and approved.json()["call_id"] == item["child_call_id"]
        done = await eventually(lambda: ana.get(f"/sessions/{root}"), lambda answer: answer.json()["state"] == "idle")
        assert "Deleted notes.txt" in done.json()["last_answer"]
        audit = (await ana.get(f"/sessions/{root}/audit")).json()
    assert not (delegating_api.agent.workspace / "notes.txt").exists()
    [where] = [event for event in audit if event.get("session_id")]
    assert {key: where[key] for key in ("event", "call_id", "tool", "by", "via", "session_id", "path")} == {
        "event": "approved", "call_id": item["call_id"], "tool": "delete_file", "by": "ana", "via": "api",
        "session_id": f"{root}/janitor/1", "path": ["janitor"]}
    read = await starter(delegating_api.agent, "audit", root)
    assert read.returncode == 0 and json.loads(read.stdout.splitlines()[-1]) == where, read.stdout + read.stderr


async def test_the_inbox_lists_a_childs_call_at_its_root_where_it_is_decided(delegating_api: Api) -> None:
    """A child's id holds `/`, which no route takes: its row points at the root, which lists the call
    and decides it (the web inbox opens the row's session and decides there)."""
    started = await delegating_api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR},
                                         participants=["bob"])
    root = started["session_id"]
    async with delegating_api.as_("bob") as bob:
        inbox = await eventually(lambda: bob.get("/inbox"), lambda answer: any(
            row["session_id"] == root for row in answer.json()))
        [row] = [row for row in inbox.json() if row["session_id"] == root]
        assert row["call_id"] == f"{root}/janitor/1/call_1" and row["tool"] == "delete_file"
        listed = (await bob.get(f"/sessions/{row['session_id']}/pending")).json()
        assert [item["call_id"] for item in listed] == [row["call_id"]]
        approved = await bob.post(f"/sessions/{row['session_id']}/calls/{quote(row['call_id'], safe='')}/approve",
                                  json={})
        assert approved.status_code == 200, approved.text
    async def deleted() -> bool:
        return not (delegating_api.agent.workspace / "notes.txt").exists()

    await eventually(deleted, bool)
