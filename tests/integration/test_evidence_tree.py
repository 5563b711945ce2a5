"""Evidence of a tree of sessions and of a period, exported with `starter.py evidence` against the
suite's dev server: each session's own records once, under its own id, with what its person was
shown and the digest of the proof they decided with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.integration.test_sub_agents import JANITOR
from tests.integration.test_sub_agents_api import delegating_api  # noqa: F401  (a fixture)
from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually
from tests.support.stack import nobody_listens, run_starter

pytestmark = pytest.mark.integration


async def export(env: WorkflowEnvironment, api: Api, key: Path, bundle: Path, *scope: str) -> list[dict[str, Any]]:
    exported = await run_starter("evidence", *scope, "-o", str(bundle), HITL_EVIDENCE_KEY=str(key),
                                 TEMPORAL_ADDRESS=env.client.service_client.config.target_host,
                                 HITL_TASK_QUEUE=api.agent.task_queue)
    assert exported.returncode == 0, exported.stderr
    verified = await run_starter("evidence", "verify", str(bundle), "--public-key", f"{key}.pub",
                                 TEMPORAL_ADDRESS=nobody_listens())
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return [json.loads(line)["data"] for line in bundle.read_text().splitlines()[1:-1]]


@pytest.fixture
async def key(tmp_path: Path) -> Path:
    made = await run_starter("evidence", "key", "-o", str(tmp_path / "operator.key"))
    assert made.returncode == 0, made.stderr
    return tmp_path / "operator.key"


async def test_a_trees_bundle_holds_each_sessions_own_records_once(
    delegating_api: Api, env: WorkflowEnvironment, key: Path, tmp_path: Path,  # noqa: F811
) -> None:
    started = await delegating_api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR},
                                         participants=["bob"])
    root = started["session_id"]
    child = f"{root}/janitor/1"
    async with delegating_api.as_("ana") as ana:
        listed = await eventually(lambda: ana.get(f"/sessions/{root}/pending"), lambda answer: bool(answer.json()))
        [item] = listed.json()
        # A child that has only asked is part of the tree too: nothing about it is in the root's audit yet.
        waiting = await export(env, delegating_api, key, tmp_path / "waiting.jsonl", "--session", root, "--tree")
        assert [(r["session_id"], r["event"]) for r in waiting if r["session_id"] == child] == [(child, "requested")]
        approved = await ana.post(f"/sessions/{root}/calls/{quote(item['call_id'], safe='')}/approve",
                                  json={"comment": "tidy"})
        assert approved.status_code == 200, approved.text
        await eventually(lambda: ana.get(f"/sessions/{root}"), lambda answer: answer.json()["state"] == "idle")

    records = await export(env, delegating_api, key, tmp_path / "tree.jsonl", "--session", root, "--tree")
    assert {r["session_id"] for r in records} == {root, child}
    childs = [r for r in records if r["session_id"] == child]
    assert [(r["event"], r.get("by")) for r in childs] == [("requested", "ana"), ("approved", "ana")]
    decided = childs[1]
    assert decided["call_id"] == item["child_call_id"] and decided["comment"] == "tidy"
    assert decided["shown"]["tool"] == "delete_file" and decided["args_sha256"] == childs[0]["args_sha256"]
    assert len(decided["decision"]["proof_sha256"]) == 64
    # The root's audit carries the child's decision as reported; the bundle holds it once, the child's own.
    assert [r for r in records if r["event"] == "approved"] == [decided]
    assert all(r["session_id"] == root for r in records[:len(records) - len(childs)])


async def test_a_periods_bundle_keeps_the_records_inside_it(
    api: Api, env: WorkflowEnvironment, key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"delete_file": {"approval": "always", "approvers": ["bob"]}}}))
    monkeypatch.setenv("HITL_POLICY", str(policy))
    (api.agent.workspace / "old.txt").write_text("old\n")
    started = await api.start("ana", "please delete notes.txt")
    session, first = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("bob") as bob, api.as_("ana") as ana:
        assert (await bob.post(f"/sessions/{session}/calls/{first}/approve", json={})).status_code == 200
        await eventually(lambda: ana.get(f"/sessions/{session}"), lambda r: r.json()["state"] == "idle")
        assert (await ana.post(f"/sessions/{session}/messages", json={"text": "please delete old.txt"})).status_code < 300
        pending = await eventually(lambda: ana.get(f"/sessions/{session}/pending"), lambda r: len(r.json()) == 1)
        second = pending.json()[0]["call_id"]
        assert (await bob.post(f"/sessions/{session}/calls/{second}/reject", json={})).status_code == 200
        audit = (await ana.get(f"/sessions/{session}/audit")).json()
    assert [row["event"] for row in audit] == ["requested", "approved", "requested", "rejected"]
    cut = audit[2]["at"]  # the second request opens the second period

    async def ours(*period: str) -> list[tuple[str, str | None]]:
        records = await export(env, api, key, tmp_path / "period.jsonl", *period)
        assert [r["at"] for r in records] == sorted(r["at"] for r in records)
        return [(r["event"], r.get("call_id")) for r in records if r["session_id"] == session]

    assert await ours("--since", audit[0]["at"], "--until", cut) == [("requested", first), ("approved", first)]
    assert await ours("--since", cut) == [("requested", second), ("rejected", second)]
    assert await ours("--since", audit[0]["at"]) == [(row["event"], row["call_id"]) for row in audit]


async def test_a_refused_signal_is_not_taken_for_the_decision_that_follows_it(
    api: Api, env: WorkflowEnvironment, key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"delete_file": {"approval": "always", "approvers": ["bob"]}}}))
    monkeypatch.setenv("HITL_POLICY", str(policy))
    started = await api.start("ana", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    # Straight through Temporal, with no proof: the session refuses it and audits the refusal.
    await env.client.get_workflow_handle(session).signal("approve", {"call_id": call, "by": "bob"})
    async with api.as_("bob") as bob:
        await eventually(lambda: bob.get(f"/sessions/{session}/audit"),
                         lambda r: [row["event"] for row in r.json()] == ["requested", "refused"])
        assert (await bob.post(f"/sessions/{session}/calls/{call}/approve", json={})).status_code == 200

    records = await export(env, api, key, tmp_path / "bundle.jsonl", "--session", session)
    assert [(r["event"], r.get("by")) for r in records] == [("requested", "ana"), ("refused", "bob"), ("approved", "bob")]
    assert "decision" not in records[1]
    assert len(records[2]["decision"]["proof_sha256"]) == 64  # the API's proof, not the refused signal's none
