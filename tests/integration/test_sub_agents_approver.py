"""A child's approver decides its call at the root, through every door that decides there, though
she may not read the root: the operator's policy gives bob's sub-agent's delete_file to ana and
carol (two approvals), and bob's root lists the call as `<root>/janitor/1/call_1`. She sees that
call (its card, the root's pending item for it) and decides it; nothing else of bob's session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, AsyncIterator
from urllib.parse import quote

import pytest
from a2a.helpers.proto_helpers import new_data_part
from a2a.utils.errors import TaskNotFoundError
from temporalio.testing import WorkflowEnvironment

from tests.integration.test_sub_agents import JANITOR, DelegatingModel
from tests.support.a2a_client import a2a_as
from tests.support.ag_ui_client import drive, step
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (a fixture)
from tests.support.sessions import eventually, running_agent

POLICY = {"tools": {"delete_file": {"approval": "always", "approvers": ["ana", "carol"], "required_approvals": 2}}}


@pytest.fixture
async def policy_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """The API and a worker that delegates, under one policy file, as an operator runs them."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    monkeypatch.setenv("HITL_POLICY", str(path))
    async for agent in running_agent(env.client, workspace, DelegatingModel()):
        async with serving(agent, policy="from HITL_POLICY") as running:
            yield running


async def bobs_delegated_delete(api: Api) -> tuple[str, dict[str, Any]]:
    """bob's root, and its child's delete_file as ana's inbox lists it."""
    root = (await api.start("bob", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR}))["session_id"]
    async with api.as_("ana") as ana:
        inbox = await eventually(lambda: ana.get("/inbox"), lambda answer: any(
            row["session_id"] == root for row in answer.json()))
    [row] = [row for row in inbox.json() if row["session_id"] == root]
    assert (row["call_id"], row["tool"]) == (f"{root}/janitor/1/call_1", "delete_file")
    return root, row


async def deleted(api: Api) -> None:
    async def gone() -> bool:
        return not (api.agent.workspace / "notes.txt").exists()

    await eventually(gone, bool)


async def test_a_childs_approver_decides_it_at_the_root_through_the_api_and_reads_only_that_call(
        policy_api: Api) -> None:
    api = policy_api
    root, row = await bobs_delegated_delete(api)
    raw, encoded = (f"/sessions/{root}/calls/{call}" for call in (row["call_id"], quote(row["call_id"], safe="")))
    async with api.as_("dave") as dave, api.as_("bob") as bob, api.as_("ana") as ana, api.as_("carol") as carol:
        for call in (raw, encoded):  # a stranger is not told the session exists
            for verb in ("approve", "reject", "claim"):
                refused = await dave.post(f"{call}/{verb}", json={})
                assert refused.status_code == 404 and "unknown session" in refused.json()["detail"], refused.text
        assert (await dave.get(f"/sessions/{root}/pending")).status_code == 404
        # bob reads his own session as before, and may not decide what the policy gives to others.
        assert [item["call_id"] for item in (await bob.get(f"/sessions/{root}/pending")).json()] == [row["call_id"]]
        assert (await bob.post(f"{raw}/approve", json={})).status_code == 403

        # ana sees the call she is asked about, and nothing else of bob's root.
        hers = await ana.get(f"/sessions/{root}/pending")
        assert hers.status_code == 200, hers.text
        [card] = hers.json()
        assert (card["call_id"], card["tool"], card["args"]) == (row["call_id"], "delete_file", {"path": "notes.txt"})
        for read in ("", "/transcript", "/audit"):
            assert (await ana.get(f"/sessions/{root}{read}")).status_code == 404, read
        assert (await ana.post(f"/sessions/{root}/messages", json={"text": "hi"})).status_code == 404

        first = await ana.post(f"{raw}/approve", json={})
        assert first.status_code == 200, first.text
        assert (await ana.post(f"{encoded}/approve", json={})).status_code in (403, 404, 409)  # one vote each
        assert (api.agent.workspace / "notes.txt").exists()  # 1 of 2
        second = await carol.post(f"{encoded}/approve", json={})
        assert second.status_code == 200, second.text
        await deleted(api)
        audit = (await bob.get(f"/sessions/{root}/audit")).json()
        assert (await ana.get(f"/sessions/{root}/pending")).status_code == 404  # nothing of hers waits now
    approvals = [(event["by"], event["via"]) for event in audit
                 if event.get("session_id") == f"{root}/janitor/1" and event["event"] == "approved"]
    assert approvals == [("ana", "api"), ("carol", "api")], audit  # each vote, each approver once


async def test_a_childs_approvers_decide_it_at_the_root_through_ag_ui_and_a2a(policy_api: Api) -> None:
    """ana's AG-UI resume is the first of two approvals: her run ends with her decision and shows
    nothing of bob's session (no interrupts, no state); carol's A2A decision is the second."""
    api = policy_api
    root, row = await bobs_delegated_delete(api)
    [stranger, by_ana] = await drive(api, root, step("dave", entries=[resumed(row["call_id"])]),
                                     step("ana", entries=[resumed(row["call_id"])]))
    assert stranger.types == ["RUN_STARTED", "RUN_ERROR"] and stranger.of_type("RUN_ERROR")[0]["code"] == "404"
    assert by_ana.finished and not by_ana.of_type("RUN_ERROR"), by_ana.events
    assert by_ana.custom("hitl.resume")[0]["outcome"] == "awaiting_more_approvals", by_ana.events
    assert by_ana.of_type("RUN_FINISHED")[0]["result"] == {"access_ended": True,
                                                            "problem": "you may no longer read this session"}
    assert not by_ana.interrupts and not by_ana.pending
    assert (api.agent.workspace / "notes.txt").exists()  # 1 of 2

    approve = {"call_id": row["call_id"], "decision": "approve"}
    async with a2a_as(api, "dave") as dave:
        with pytest.raises(TaskNotFoundError):
            await dave.send(new_data_part(approve), task_id=root)
    async with a2a_as(api, "carol") as carol:
        task = await carol.send(new_data_part(approve), task_id=root)
        assert task.id == root and not task.artifacts  # the decision, not bob's session
        assert "delegate janitor" not in str(task) and "approved" in str(task)
        with pytest.raises(TaskNotFoundError):  # she reads nothing else of it
            await carol.get(root)
    await deleted(api)
    async with api.as_("bob") as bob:
        audit = (await bob.get(f"/sessions/{root}/audit")).json()
    decided = [(event["by"], event["via"]) for event in audit
               if event.get("session_id") == f"{root}/janitor/1" and event["event"] == "approved"]
    assert decided == [("ana", "ag-ui"), ("carol", "a2a")], audit


def resumed(call_id: str) -> dict[str, Any]:
    return {"interruptId": call_id, "status": "resolved", "payload": {"decision": "approve"}}
