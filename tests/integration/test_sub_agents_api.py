"""Sub-agents through the HTTP API: a child's call, listed by its root, is decided at the root's
URL, by the people of the root, with a proof the API signs for the child (its session and call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import AsyncIterator
from urllib.parse import quote

import pytest
from temporalio.client import WorkflowExecutionStatus
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


async def test_a_childs_status_pending_transcript_and_audit_are_read_by_the_readers_of_its_root(delegating_api: Api) -> None:
    """A child's id holds `/`: its reads take it as the root's pending lists it (raw or URL-encoded),
    for whoever may read the root; anyone else is not told it exists, a malformed id is a 422, and
    a session that only took a child's id (started straight through Temporal) is no child."""
    started = await delegating_api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR},
                                         participants=["bob"])
    root = started["session_id"]
    child = f"{root}/janitor/1"
    poser = await delegating_api.agent.start("delete notes.txt", session_id=f"{root}/janitor/7", by="bob")
    async with delegating_api.as_("bob") as bob:
        await eventually(lambda: bob.get(f"/sessions/{root}/pending"), lambda answer: bool(answer.json()))
        status = await bob.get(f"/sessions/{child}")
        assert status.status_code == 200 and status.json()["state"] == "awaiting_human", status.text
        [item] = (await bob.get(f"/sessions/{quote(child, safe='')}/pending")).json()
        assert (item["call_id"], item["tool"]) == ("call_1", "delete_file")
        transcript = await bob.get(f"/sessions/{child}/transcript")
        assert transcript.json()[0] == {"role": "user", "content": "delete notes.txt"}, transcript.text
        audit = (await bob.get(f"/sessions/{child}/audit")).json()
        assert [(event["event"], event["call_id"]) for event in audit] == [("requested", "call_1")]
        malformed = await bob.get(f"/sessions/{root}/janitor/one/audit")
        assert malformed.status_code == 422 and "<root id>/<agent>/<n>" in malformed.json()["detail"]
        assert (await bob.get(f"/sessions/{root}/janitor/9/transcript")).status_code == 404
        posing = await bob.get(f"/sessions/{poser.id}/transcript")
        assert posing.status_code == 404 and "no child session" in posing.json()["detail"], posing.text
    async with delegating_api.as_("carol") as carol:
        for read in ("", "/pending", "/transcript", "/audit"):
            assert (await carol.get(f"/sessions/{child}{read}")).status_code == 404, read


async def test_a_root_id_used_again_after_its_session_closed_reads_none_of_the_old_trees_children(
        delegating_api: Api) -> None:
    """ana's session delegated to a child, and was cancelled; carol starts a new session under the
    same id straight through Temporal. The old child is not the new root's child: its reads are 404
    for carol, who may read the new root."""
    started = await delegating_api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR})
    root = started["session_id"]
    child = f"{root}/janitor/1"
    async with delegating_api.as_("ana") as ana:
        await eventually(lambda: ana.get(f"/sessions/{root}/pending"), lambda answer: bool(answer.json()))
        assert (await ana.post(f"/sessions/{root}/cancel", json={})).status_code == 200
        await eventually(lambda: ana.get(f"/sessions/{root}"), lambda answer: answer.json()["state"] == "closed")
        assert (await ana.get(f"/sessions/{child}/transcript")).status_code == 200  # hers, while the id is hers
    old = delegating_api.agent.client.get_workflow_handle(root)
    await eventually(old.describe, lambda described: described.status != WorkflowExecutionStatus.RUNNING)
    # The API refuses an id a closed session had; a session started straight through Temporal may take it.
    await delegating_api.agent.start("hello", session_id=root, by="carol")
    async with delegating_api.as_("carol") as carol:
        await eventually(lambda: carol.get(f"/sessions/{root}"), lambda answer: answer.status_code == 200)
    async with delegating_api.as_("carol") as carol:
        for read in ("", "/pending", "/transcript", "/audit"):
            answer = await carol.get(f"/sessions/{child}{read}")
            assert answer.status_code == 404, (read, answer.text)
