"""Verified identities hold against direct Temporal access: a `by` typed into the `temporal` CLI
does not count on a session the API started, while the same person through the API does."""

from __future__ import annotations

import json

from hitl.api.gateway import chain_of
from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually
from tests.integration.test_cli import temporal


async def test_a_forged_by_through_the_temporal_cli_is_refused_and_the_same_person_through_the_api_counts(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    forged = json.dumps({"call_id": call, "by": "bob"})

    update = await temporal(api.agent, "workflow", "update", "execute", "--workflow-id", session,
                            "--name", "approve_update", "--input", forged)
    assert update.returncode != 0
    assert "only verified decisions" in update.stderr, update.stderr

    signal = await temporal(api.agent, "workflow", "signal", "--workflow-id", session, "--name", "approve", "--input", forged)
    assert signal.returncode == 0, signal.stderr  # a signal is delivered, then refused by the session

    async with api.as_("bob") as bob:
        audit = await eventually(lambda: bob.get(f"/sessions/{session}/audit"),
                                 lambda answer: any(e["event"] == "refused" and e.get("signal") == "approve"
                                                    for e in answer.json()))
        refusals = [e for e in audit.json() if e["event"] == "refused"]
        assert all("only verified decisions" in e["reason"] for e in refusals), refusals
        assert (await bob.get(f"/sessions/{session}/pending")).json()[0]["call_id"] == call
        assert (api.agent.workspace / "notes.txt").exists()

        through_api = await bob.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert through_api.status_code == 200, through_api.text
        assert through_api.json()["outcome"] == "approved"
    async with api.as_("ana") as ana:  # bob decided nothing else there: the session is its owner's to read now
        await eventually(lambda: ana.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        audit = (await ana.get(f"/sessions/{session}/audit")).json()
    assert [(e["by"], e["via"]) for e in audit if e["event"] == "approved"] == [("bob", "api")]
    assert not (api.agent.workspace / "notes.txt").exists()


async def test_a_proof_binds_the_door_its_decision_came_through(api: Api) -> None:
    """A decision signed as made through the API cannot be sent on as made in Slack, nor the reverse."""
    started = await api.start("ana", "please delete notes.txt")
    session, item = started["session_id"], started["pending"][0]
    from hitl.api.app import signing_key as key_of_the_api
    from workflows.decisions import parse_decision
    from workflows.proofs import sign_decision

    key_id, key = key_of_the_api()
    through_the_api = {"call_id": item["call_id"], "by": "bob", "via": "api"}
    described = await api.agent.client.get_workflow_handle(session).describe()
    proof = sign_decision(key, key_id, session_id=session, call_id=item["call_id"], action="approve", by="bob",
                          args_sha256=item["args_sha256"], run_id=described.run_id, chain=chain_of(described),
                          decision_sha256=parse_decision("approve", through_the_api).digest())
    claimed_elsewhere = json.dumps({**through_the_api, "via": "slack", "proof": proof})
    update = await temporal(api.agent, "workflow", "update", "execute", "--workflow-id", session,
                            "--name", "approve_update", "--input", claimed_elsewhere)
    assert update.returncode != 0, update.stdout
    assert "does not match" in update.stderr or "proof" in update.stderr, update.stderr
    async with api.as_("ana") as ana:
        assert [p["call_id"] for p in (await ana.get(f"/sessions/{session}/pending")).json()] == [item["call_id"]]
    assert (api.agent.workspace / "notes.txt").exists()
    as_signed = await temporal(api.agent, "workflow", "update", "execute", "--workflow-id", session,
                               "--name", "approve_update", "--input", json.dumps({**through_the_api, "proof": proof}))
    assert as_signed.returncode == 0, as_signed.stderr  # the same proof carries the decision it was made for


async def test_a_proof_is_bound_to_its_call_and_cannot_be_replayed_through_the_cli(api: Api) -> None:
    """A proof lifted from one decision (say, from the session's history) does not carry another."""
    started = await api.start("ana", "please delete notes.txt")
    session, item = started["session_id"], started["pending"][0]
    from hitl.api.app import signing_key as key_of_the_api
    from workflows.proofs import sign_decision

    key_id, key = key_of_the_api()
    for_another_call = sign_decision(key, key_id, session_id=session, call_id="call-elsewhere", action="approve",
                                     by="bob", args_sha256=item["args_sha256"])
    for_another_verb = sign_decision(key, key_id, session_id=session, call_id=item["call_id"], action="reject",
                                     by="bob", args_sha256=item["args_sha256"])
    for proof in (for_another_call, for_another_verb):
        forged = json.dumps({"call_id": item["call_id"], "by": "bob", "proof": proof})
        update = await temporal(api.agent, "workflow", "update", "execute", "--workflow-id", session,
                                "--name", "approve_update", "--input", forged)
        assert update.returncode != 0, update.stdout
    async with api.as_("ana") as ana:
        assert [p["call_id"] for p in (await ana.get(f"/sessions/{session}/pending")).json()] == [item["call_id"]]
