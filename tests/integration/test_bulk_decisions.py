"""Bulk decisions (docs/interface.md, "Decisions at scale"): `GET /inbox` filters draw the table,
`POST /decisions` decides its rows at once, each as its own decision through the same path as one
API decision: its access check, the session's rules, its own proof and audit row, and only while
the call's arguments still have the digest the table showed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.decision_keys import trusted_keys
from hitl.testing import scripted_model
from tests.support.api_server import Api, serving, signing_key, token_of  # noqa: F401  (fixture)
from tests.support.stack import ROOT
from tests.support.sessions import eventually, running_agent
from workflows.proofs import DecisionClaims, verify_decision

# Every session's model asks two emails in one reply: call_1_1 (to ana) and call_1_2 (to bea).
def email(to: str) -> dict[str, str]:
    return {"to": to, "subject": "refund", "body": "Your refund is on its way."}


TWO_EMAILS = [{"calls": [{"call": "send_email", "args": email("ana@example.com")},
                         {"call": "send_email", "args": email("bea@example.com")}]},
              {"say": "Done."}]
BOBS = {"send_email": ["bob", "carol"]}


@pytest.fixture
async def bulk_api(env: WorkflowEnvironment, workspace: Path, signing_key: str) -> AsyncIterator[Api]:
    async for agent in running_agent(env.client, workspace, scripted_model(TWO_EMAILS)):
        async with serving(agent) as running:
            yield running


async def inbox_of(api: Api, person: str, query: str = "") -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get(f"/inbox{query}")
    assert answer.status_code == 200, answer.text
    return answer.json()


async def decide_all(api: Api, person: str, rows: list[dict[str, Any]], decision: str = "approve",
                     all_or_nothing: bool = False, reason: str | None = None) -> list[dict[str, Any]]:
    body = {"decisions": [{"session_id": row["session_id"], "call_id": row["call_id"], "args_sha256": row["args_sha256"],
                           "decision": decision, **({"reason": reason} if reason else {})} for row in rows],
            "all_or_nothing": all_or_nothing}
    async with api.as_(person) as http:
        answer = await http.post("/decisions", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def start_many(api: Api, starts: list[tuple[str, dict[str, Any]]]) -> list[str]:
    started = await asyncio.gather(*(api.start(person, "tidy up", **options) for person, options in starts))
    assert all(len(one["pending"]) == 2 for one in started), started
    return [one["session_id"] for one in started]


async def audit_of(api: Api, person: str, session_id: str) -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get(f"/sessions/{session_id}/audit")
    assert answer.status_code == 200, answer.text
    return answer.json()


async def proofs_in(api: Api, session_id: str) -> list[DecisionClaims]:
    """The claims of every decision proof the session's history holds (its accepted Updates)."""
    client = api.agent.client
    claims = []
    async for event in client.get_workflow_handle(session_id).fetch_history_events():
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            [payload] = await client.data_converter.decode(request.input.args.payloads)
            if isinstance(payload, dict) and payload.get("proof"):
                claims.append(verify_decision(payload["proof"], trusted_keys(), datetime.now(timezone.utc)))
    return claims


async def test_forty_calls_in_twenty_sessions_decided_in_one_request(bulk_api: Api) -> None:
    api = bulk_api
    plain = await start_many(api, [("ana", {"approvers": BOBS})] * 17)
    [two_of_three, carols_only, bobs_own] = await start_many(api, [
        ("ana", {"approvers": {"send_email": ["bob", "carol", "dave"]}, "required_approvals": {"send_email": 2}}),
        ("ana", {"approvers": {"send_email": ["carol"]}, "participants": ["bob"]}),
        ("bob", {"approvers": BOBS, "four_eyes": True}),
    ])
    table = await eventually(lambda: inbox_of(api, "bob", "?tool=send_email"), lambda rows: len(rows) == 36)
    assert {row["session_id"] for row in table} == {*plain, two_of_three}
    assert all(row["args_sha256"] for row in table)
    # What bob's table does not list, a client may still send: the sessions refuse it.
    others = [row for row in await eventually(lambda: inbox_of(api, "carol", "?tool=send_email"),
                                              lambda rows: len(rows) == 40)
              if row["session_id"] in (carols_only, bobs_own)]
    # After the table was drawn, dave's vote edits the arguments of one call.
    async with api.as_("dave") as dave:
        edited = await dave.post(f"/sessions/{two_of_three}/calls/call_1_1/approve", json={"args": email("cy@example.com")})
    assert edited.status_code == 200, edited.text

    answers = await decide_all(api, "bob", table + others)

    assert [(a["session_id"], a["call_id"]) for a in answers] == [(r["session_id"], r["call_id"]) for r in table + others]
    refused = {(a["session_id"], a["call_id"]): a for a in answers if a["outcome"] == "refused"}
    assert set(refused) == {(two_of_three, "call_1_1"), (carols_only, "call_1_1"), (carols_only, "call_1_2"),
                            (bobs_own, "call_1_1"), (bobs_own, "call_1_2")}, refused
    stale = refused[(two_of_three, "call_1_1")]
    assert (stale["code"], "stale decision" in stale["reason"]) == ("conflict", True), stale
    not_his = refused[(carols_only, "call_1_1")]
    assert (not_his["code"], not_his["reason"]) == ("forbidden", "bob may not decide send_email; approvers: carol")
    own = refused[(bobs_own, "call_1_2")]
    assert (own["code"], own["reason"]) == ("forbidden", "four-eyes rule: bob asked for this call and cannot approve it")
    assert all(a["outcome"] == "decided" for a in answers if (a["session_id"], a["call_id"]) not in refused)

    # Each decision is its own: an audit row by bob through the API, and a proof signed for him,
    # that call and the arguments his table showed.
    shown = {(row["session_id"], row["call_id"]): row["args_sha256"] for row in table}
    nonces = set()
    for session_id in plain:
        decided = [event for event in await audit_of(api, "ana", session_id)
                   if event["event"] == "approved" and event.get("by") == "bob"]
        assert sorted((event["call_id"], event["via"]) for event in decided) == [("call_1_1", "api"), ("call_1_2", "api")]
        assert all(event["args_sha256"] == shown[(session_id, event["call_id"])] for event in decided)
        proofs = await proofs_in(api, session_id)
        assert sorted((p.call_id, p.by, p.action, p.args_sha256) for p in proofs) == sorted(
            (call, "bob", "approve", shown[(session_id, call)]) for call in ("call_1_1", "call_1_2"))
        nonces |= {p.nonce for p in proofs}
    assert len(nonces) == 34
    voted = [event for event in await audit_of(api, "ana", two_of_three) if event.get("by") == "bob"]
    assert [(event["event"], event["call_id"], event["rule"]) for event in voted] == [
        ("approved", "call_1_2", "1 of 2 approvals")], voted  # a vote: the call waits for another
    for session_id, owner in ((carols_only, "ana"), (bobs_own, "bob")):
        assert not [event for event in await audit_of(api, owner, session_id)
                    if event.get("by") == "bob" and event["event"] in ("approved", "rejected")]


async def test_all_or_nothing_decides_none_when_one_would_be_refused(bulk_api: Api) -> None:
    api = bulk_api
    [first, second] = await start_many(api, [("ana", {"approvers": BOBS})] * 2)
    table = await eventually(lambda: inbox_of(api, "bob", f"?session={first}"), lambda rows: len(rows) == 2)
    stale = {**table[1], "args_sha256": "0" * 64}

    answers = await decide_all(api, "bob", [table[0], stale], decision="reject", all_or_nothing=True, reason="no")

    assert [(a["call_id"], a["outcome"], a.get("code")) for a in answers] == [
        ("call_1_1", "refused", "all_or_nothing"), ("call_1_2", "refused", "conflict")], answers
    async with api.as_("bob") as bob:
        pending = (await bob.get(f"/sessions/{first}/pending")).json()
    assert [item["call_id"] for item in pending] == ["call_1_1", "call_1_2"]

    whole = await eventually(lambda: inbox_of(api, "bob", f"?session={second}"), lambda rows: len(rows) == 2)
    answers = await decide_all(api, "bob", whole, decision="reject", all_or_nothing=True, reason="not today")
    assert [a["outcome"] for a in answers] == ["decided", "decided"], answers
    rejected = [event for event in await audit_of(api, "ana", second) if event["event"] == "rejected"]
    assert sorted((event["call_id"], event.get("comment")) for event in rejected) == [("call_1_1", "not today"),
                                                                                ("call_1_2", "not today")]


async def test_inbox_filters_narrow_the_table(bulk_api: Api) -> None:
    api = bulk_api
    [ours] = await start_many(api, [("ana", {"approvers": BOBS})])
    await eventually(lambda: inbox_of(api, "bob", f"?session={ours}"), lambda rows: len(rows) == 2)

    only_a = await inbox_of(api, "bob", f"?session={ours}&arg.to=ana@example.com")
    assert [row["call_id"] for row in only_a] == ["call_1_1"]
    assert await inbox_of(api, "bob", f"?session={ours}&requested_by=carol") == []
    assert len(await inbox_of(api, "bob", f"?session={ours}&requested_by=ana&tool=send_email")) == 2
    assert await inbox_of(api, "bob", f"?session={ours}&older_than=1d") == []
    assert len(await inbox_of(api, "bob", f"?session={ours}&older_than=2000-01-01T00:00:00Z")) == 0
    assert len(await inbox_of(api, "bob", f"?session={ours}&older_than=2999-01-01T00:00:00Z")) == 2
    async with api.as_("bob") as bob:
        bad = await bob.get("/inbox?older_than=soon")
        twice = await bob.post("/decisions", json={"decisions": [
            {"session_id": ours, "call_id": "call_1_1", "args_sha256": "a" * 64, "decision": "approve"}] * 2})
        too_many = await bob.post("/decisions", json={"decisions": [
            {"session_id": ours, "call_id": f"c{i}", "args_sha256": "a" * 64, "decision": "approve"} for i in range(1001)]})
    assert (bad.status_code, "older_than 'soon'" in bad.json()["detail"]) == (422, True), bad.text
    assert (twice.status_code, "named twice" in twice.json()["detail"]) == (422, True), twice.text
    assert too_many.status_code == 422, too_many.text


# ---------------------------------------------------------------- one action, from the CLI and the web

async def forty_for_bob(api: Api) -> tuple[list[str], str]:
    """Twenty sessions of two calls each that bob decides: nineteen plain, and one whose calls need
    two approvals (where dave's vote can edit the arguments after bob's table was drawn)."""
    plain = await start_many(api, [("ana", {"approvers": BOBS})] * 19)
    [two_of_three] = await start_many(api, [
        ("ana", {"approvers": {"send_email": ["bob", "carol", "dave"]}, "required_approvals": {"send_email": 2}})])
    return plain, two_of_three


async def dave_edits(api: Api, session_id: str) -> None:
    """dave's vote edits call_1_1's arguments: the digest any earlier table showed no longer holds."""
    async with api.as_("dave") as dave:
        edited = await dave.post(f"/sessions/{session_id}/calls/call_1_1/approve", json={"args": email("cy@example.com")})
    assert edited.status_code == 200, edited.text


def outcome_lines(printed: str) -> dict[tuple[str, str], str]:
    """`starter.py inbox ... --approve-all`'s lines: `decided  S  C` or `refused  S  C  code: reason`."""
    found = {}
    for line in printed.splitlines():
        words = line.split(None, 3)
        if len(words) >= 3 and words[0] in ("decided", "refused"):
            found[(words[1], words[2])] = line
    return found


async def test_the_cli_decides_what_its_table_showed_after_asking(bulk_api: Api) -> None:
    api = bulk_api
    plain, two_of_three = await forty_for_bob(api)
    await eventually(lambda: inbox_of(api, "bob", "?tool=send_email"), lambda rows: len(rows) == 40)
    command = [sys.executable, str(ROOT / "starter.py"), "inbox", "--tool", "send_email", "--arg", "subject=refund",
               "--approve-all", "--api", api.base]
    cli = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env={**os.environ, "HITL_API_TOKEN": token_of("bob")},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert cli.stdout is not None and cli.stdin is not None
    shown = ""
    while "[y/N]" not in shown:  # the table, then the question
        chunk = await asyncio.wait_for(cli.stdout.read(4096), 60)
        assert chunk, f"the CLI ended before asking: {shown}"
        shown += chunk.decode()
    assert "approve 40 calls? [y/N]" in shown, shown
    assert shown.count("send_email(") == 40, shown
    await dave_edits(api, two_of_three)  # after the table was drawn, before the answer

    cli.stdin.write(b"y\n")
    out, err = await asyncio.wait_for(cli.communicate(), 120)
    lines = outcome_lines(out.decode())

    assert cli.returncode == 2, (out, err)  # one refused
    assert len(lines) == 40, out
    refused = {key: line for key, line in lines.items() if line.startswith("refused")}
    assert list(refused) == [(two_of_three, "call_1_1")], refused
    assert "conflict: stale decision" in refused[(two_of_three, "call_1_1")]
    assert "39 decided, 1 refused" in out.decode()
    for session_id in plain[:3]:  # each its own decision, by bob through the API
        decided = [event for event in await audit_of(api, "ana", session_id) if event["event"] == "approved"]
        assert sorted((event["call_id"], event["by"], event["via"]) for event in decided) == [
            ("call_1_1", "bob", "api"), ("call_1_2", "bob", "api")]
        assert len(await proofs_in(api, session_id)) == 2


async def test_the_cli_asks_first_and_says_what_it_needs(bulk_api: Api) -> None:
    api = bulk_api
    [ours] = await start_many(api, [("ana", {"approvers": BOBS})])
    await eventually(lambda: inbox_of(api, "bob", f"?session={ours}"), lambda rows: len(rows) == 2)
    base = [sys.executable, str(ROOT / "starter.py"), "inbox", "--session", ours, "--api", api.base]
    env = {**os.environ, "HITL_API_TOKEN": token_of("bob")}

    def run(*args: str, answer: str = "", token: bool = True) -> "asyncio.Future[subprocess.CompletedProcess[str]]":
        return asyncio.ensure_future(asyncio.to_thread(
            subprocess.run, [*base, *args], input=answer, capture_output=True, text=True, timeout=120, cwd=ROOT,
            env=env if token else {k: v for k, v in env.items() if k != "HITL_API_TOKEN"}))

    declined = await run("--reject-all", "--reason", "not now", answer="n\n")
    no_reason = await run("--reject-all")
    no_token = await run("--approve-all", "--yes", token=False)
    assert (declined.returncode, "reject 2 calls? [y/N]" in declined.stdout, "nothing decided" in declined.stdout) == (
        1, True, True), declined
    assert (no_reason.returncode, no_reason.stderr.strip()) == (1, "error: --reject-all needs --reason (the model reads it)")
    assert no_token.returncode == 1 and "HITL_API_TOKEN" in no_token.stderr, no_token
    assert len(await inbox_of(api, "bob", f"?session={ours}")) == 2  # nothing was decided

    scripted = await run("--reject-all", "--reason", "not now", "--yes")
    assert scripted.returncode == 0, scripted
    assert sorted(outcome_lines(scripted.stdout)) == [(ours, "call_1_1"), (ours, "call_1_2")]
    rejected = [event for event in await audit_of(api, "ana", ours) if event["event"] == "rejected"]
    assert sorted((event["call_id"], event["by"], event["comment"]) for event in rejected) == [
        ("call_1_1", "bob", "not now"), ("call_1_2", "bob", "not now")]
