"""The operator's policy at the API's door: who may start a session, the floor a session's own
rules may not go under, operators who may see and steer every session, groups that decide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.devserver import free_port
from tests.support.api_server import Api, EventStream, of_type, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent
from tests.support.stack import ROOT

POLICY = {
    "groups": {"oncall": ["bob", "carol"], "admins": ["olga"]},
    "operators": ["@admins"],
    "sessions": {"may_start": ["ana", "bob", "olga"]},
    "tools": {"delete_file": {"approval": "always", "approvers": ["@oncall"]}},
}


@pytest.fixture
async def policy_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """The API and the worker under one policy file, as an operator runs them."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    monkeypatch.setenv("HITL_POLICY", str(path))
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, policy="from HITL_POLICY") as running:
            yield running


async def inbox(api: Api, person: str) -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get("/inbox")
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_who_may_start_and_the_floor_a_session_may_not_go_under(policy_api: Api) -> None:
    api = policy_api
    async with api.as_("carol") as carol, api.as_("ana") as ana:
        refused = await carol.post("/sessions", json={"message": "hello there"})
        assert refused.status_code == 403, refused.text
        assert "sessions.may_start" in refused.json()["detail"]
        loosened = await ana.post("/sessions", json={"message": "please delete notes.txt", "auto_approve": ["delete_file"]})
        assert loosened.status_code == 422, loosened.text
        assert loosened.json()["detail"].startswith("invalid session input: auto_approve")
        assert "operator's policy" in loosened.json()["detail"]
        outside = await ana.post("/sessions", json={"message": "please delete notes.txt", "approvers": {"delete_file": ["dave"]}})
        assert outside.status_code == 422, outside.text
        assert "dave may not decide delete_file" in outside.json()["detail"]
    assert (api.agent.workspace / "notes.txt").exists()


async def test_a_group_decides_an_operator_sees_and_steers_and_nobody_else_sees_anything(policy_api: Api) -> None:
    api = policy_api
    started = await api.start("ana", "please delete notes.txt")
    session, [item] = started["session_id"], started["pending"]
    assert set(item["approvers"]) == {"bob", "carol"}  # @oncall, as the worker expanded it

    by_group = (await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["@oncall"]}))["session_id"]
    rows = await eventually(lambda: inbox(api, "carol"),
                            lambda rows: {session, by_group} <= {row["session_id"] for row in rows})
    assert [row["call_id"] for row in rows if row["session_id"] == session] == [item["call_id"]]
    assert [row for row in await inbox(api, "ana") if row["session_id"] == session] == []  # hers, not hers to decide
    assert [row for row in await inbox(api, "dave") if row["session_id"] in (session, by_group)] == []
    async with api.as_("dave") as dave, api.as_("olga") as olga, api.as_("ana") as ana, api.as_("bob") as bob:
        assert (await dave.get(f"/sessions/{session}")).status_code == 404
        assert (await olga.get(f"/sessions/{session}/transcript")).status_code == 200  # an operator reads any session
        not_hers = await ana.post(f"/sessions/{session}/calls/{item['call_id']}/approve", json={})
        assert not_hers.status_code == 403, not_hers.text
        approved = await bob.post(f"/sessions/{session}/calls/{item['call_id']}/approve", json={})
        assert approved.status_code == 200, approved.text
        await eventually(lambda: olga.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        steered = await olga.post(f"/sessions/{session}/messages", json={"text": "hello there"})
        assert steered.status_code == 200, steered.text
        assert (await olga.post(f"/sessions/{session}/cancel", json={"reason": "operator"})).status_code == 200
    assert not (api.agent.workspace / "notes.txt").exists()


async def test_an_operator_struck_from_the_policy_file_loses_the_session_and_its_open_stream(
        policy_api: Api, tmp_path: Path) -> None:
    api = policy_api
    session = (await api.start("ana", "hello there"))["session_id"]
    async with api.as_("olga") as olga:
        async with olga.stream("GET", f"/sessions/{session}/events") as response:
            stream = EventStream(response)
            await stream.read_until(lambda seen: bool(of_type(seen, "answer")))

            (tmp_path / "policy.json").write_text("{half written")  # a change that does not parse changes nothing
            assert (await olga.get(f"/sessions/{session}")).status_code == 200
            (tmp_path / "policy.json").write_text(json.dumps({**POLICY, "operators": []}))
            assert (await olga.get(f"/sessions/{session}")).status_code == 404
            async with api.as_("ana") as ana:
                sent = await ana.post(f"/sessions/{session}/messages", json={"text": "something olga may not read"})
                assert sent.status_code == 200, sent.text

            seen = await stream.read_until(lambda seen: bool(of_type(seen, "end")) or "olga may not" in str(seen))
    assert "olga may not" not in str(seen), seen
    assert seen[-1]["data"] == {"problem": "you may no longer read this session", "access_ended": True}


def test_a_malformed_policy_stops_serve_with_one_line(tmp_path: Path) -> None:
    for content, reason in (("{not json", "not JSON"), ('{"operators": "olga"}', "operators")):
        policy = tmp_path / "policy.json"
        policy.write_text(content)
        completed = subprocess.run(
            [sys.executable, "starter.py", "serve", "--port", str(free_port())], cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "HITL_POLICY": str(policy), "HITL_KEYS_DIR": str(tmp_path)},
            capture_output=True, text=True, timeout=60,
        )
        assert completed.returncode != 0
        assert "Traceback" not in completed.stderr, completed.stderr
        [line] = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
        assert "HITL_POLICY" in line and reason in line, completed.stderr
