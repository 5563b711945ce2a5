"""Evidence an auditor verifies (docs/evidence-bundles.md): a real run's bundle, exported with
`starter.py evidence`, verifies with the public key alone and no Temporal; one byte flipped, a
record dropped or two swapped are each named."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually
from tests.support.stack import nobody_listens, run_starter

pytestmark = pytest.mark.integration


async def test_a_real_runs_bundle_verifies_alone_and_names_what_was_tampered_with(
    api: Api, env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"delete_file": {"approval": "always", "approvers": ["bob"]}}}))
    monkeypatch.setenv("HITL_POLICY", str(policy))  # the in-process worker's judge reads it per call
    (api.agent.workspace / "old.txt").write_text("old\n")
    started = await api.start("ana", "please delete notes.txt")
    session, first = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("bob") as bob, api.as_("ana") as ana:
        decided = await bob.post(f"/sessions/{session}/calls/{first}/approve", json={"comment": "checked"})
        assert decided.status_code == 200, decided.text
        await eventually(lambda: ana.get(f"/sessions/{session}"), lambda r: r.json()["state"] == "idle")
        assert (await ana.post(f"/sessions/{session}/messages", json={"text": "please delete old.txt"})).status_code < 300
        pending = await eventually(lambda: ana.get(f"/sessions/{session}/pending"), lambda r: len(r.json()) == 1)
        second = pending.json()[0]["call_id"]
        refused = await bob.post(f"/sessions/{session}/calls/{second}/reject", json={"reason": "keep it"})
        assert refused.status_code == 200, refused.text

    key, bundle = tmp_path / "operator.key", tmp_path / "bundle.jsonl"
    assert (made := await run_starter("evidence", "key", "-o", str(key))).returncode == 0, made.stderr
    address = env.client.service_client.config.target_host
    exported = await run_starter("evidence", "--session", session, "-o", str(bundle), TEMPORAL_ADDRESS=address,
                                 HITL_TASK_QUEUE=api.agent.task_queue, HITL_EVIDENCE_KEY=str(key))
    assert exported.returncode == 0, exported.stderr

    records = [json.loads(line)["data"] for line in bundle.read_text().splitlines()[1:-1]]
    assert [(r["event"], r.get("by")) for r in records] == [
        ("requested", "ana"), ("approved", "bob"), ("requested", "ana"), ("rejected", "bob")]
    approved, rejected = records[1], records[3]
    assert (approved["via"], approved["comment"]) == ("api", "checked") and rejected["reason"].endswith("keep it")
    assert approved["shown"]["approvers"] == ["bob"] and "because" in approved["shown"]
    assert approved["policy_sha256"] == hashlib.sha256(policy.read_bytes()).hexdigest()
    assert len(approved["decision"]["proof_sha256"]) == 64  # the API signed a proof for bob
    assert approved["args_sha256"] == records[0]["args_sha256"]

    async def verify(text: str) -> tuple[int, str]:
        tampered = tmp_path / "tampered.jsonl"
        tampered.write_text(text)
        ran = await run_starter("evidence", "verify", str(tampered), "--public-key", f"{key}.pub",
                                TEMPORAL_ADDRESS=nobody_listens())  # verifying needs no Temporal
        return ran.returncode, ran.stdout + ran.stderr

    lines = bundle.read_text().splitlines(keepends=True)
    assert await verify("".join(lines)) == (0, "intact: 4 records, signed by this key\n")
    flipped = lines.copy()
    flipped[2] = flipped[2].replace('"by":"bob"', '"by":"bod"').replace('"by": "bob"', '"by": "bod"')
    assert flipped[2] != lines[2]
    assert await verify("".join(flipped)) == (1, "NOT intact: line 3 (record 2): altered, its content does not "
                                                 "match its signature\n")
    assert await verify("".join(lines[:2] + lines[3:])) == (
        1, "NOT intact: line 3: record 2 is missing (record 3 follows record 1)\n")
    swapped = lines[:2] + [lines[3], lines[2]] + lines[4:]
    assert await verify("".join(swapped)) == (1, "NOT intact: line 3: record 3 is out of order (record 2 is at line 4)\n")


@pytest.mark.parametrize("where", ["a missing folder", "a folder"])
async def test_a_bundle_file_that_cannot_be_written_is_one_line_not_a_traceback(
    env: WorkflowEnvironment, tmp_path: Path, where: str,
) -> None:
    key = tmp_path / "operator.key"
    assert (made := await run_starter("evidence", "key", "-o", str(key))).returncode == 0, made.stderr
    output = tmp_path / "missing" / "bundle.jsonl" if where == "a missing folder" else tmp_path
    exported = await run_starter("evidence", "--since", "2026-01-01T00:00:00Z", "-o", str(output),
                                 TEMPORAL_ADDRESS=env.client.service_client.config.target_host,
                                 HITL_EVIDENCE_KEY=str(key))
    assert "Traceback" not in exported.stderr, exported.stderr[-800:]
    assert exported.returncode == 2 and exported.stderr.count("\n") == 1, exported.stderr
    assert exported.stderr.startswith("error: ") and str(output) in exported.stderr, exported.stderr
