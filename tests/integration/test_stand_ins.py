"""Stand-ins (docs/interface.md, "Decisions at scale", Delegation): ana hands her decisions to bob
while away; bob decides "for ana" through the real API, against the real dev server and worker,
and the session has the last word on what such a decision may do."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.decision_keys import signing_key as api_signing_key
from hitl.email_links import read_link_token
from hitl.worker import build_worker
from activities.mail import Mailer, mailer
from hitl.channels import channels_from_env
from hitl.email_links import link_key_from_seed
from tests.support.mail_server import Inbox, links_in, mail_server
from tests.support.api_server import Api, serving, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.sessions import Agent, eventually, query, running_agent
from tests.support.stack import ROOT
from workflows.contract import NOTIFY
from workflows.decisions import parse_decision
from workflows.proofs import sign_decision
from workflows.stand_in_book import StandInBook, book_id
from workflows.stand_ins import StandIn

POLICY = {
    "groups": {"staff": ["ana", "bob", "carol", "dave"]},
    "sessions": {"may_start": ["@staff"]},
    "tools": {
        "delete_file": {"approval": "always", "approvers": ["ana"], "four_eyes": True, "delegation": True},
        "send_email": {"approval": "always", "approvers": ["ana", "carol", "dave"], "required_approvals": 2,
                       "delegation": True},
        "draft_email": {"approval": "always", "approvers": ["ana"]},
    },
}


@pytest.fixture
async def policy_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, tmp_path: Path,  # noqa: F811
                     monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    monkeypatch.setenv("HITL_POLICY", str(path))
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, policy="from HITL_POLICY") as running:
            yield running


def in_a_day() -> str:
    return (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()


async def hand_over(api: Api, person: str, to: str, tools: list[str] | None = None, status: int = 201,
                    until: str | None = None) -> dict[str, Any]:
    async with api.as_(person) as http:
        answer = await http.post("/people/me/delegations", json={"to": to, "until": until or in_a_day(),
                                                                 **({"tools": tools} if tools else {})})
    assert answer.status_code == status, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def decide(api: Api, person: str, session: str, call_id: str, verb: str = "approve") -> Any:
    async with api.as_(person) as http:
        return await http.post(f"/sessions/{session}/calls/{call_id}/{verb}", json={})


async def inbox(api: Api, person: str) -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get("/inbox")
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def audit(api: Api, person: str, session: str) -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get(f"/sessions/{session}/audit")
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def test_bob_decides_for_ana_while_she_is_away_and_not_after(policy_api: Api) -> None:
    api = policy_api
    started = await api.start("carol", "please delete notes.txt")
    session, [item] = started["session_id"], started["pending"]
    assert item["approvers"] == ["ana"]
    refused = await decide(api, "bob", session, item["call_id"])
    assert refused.status_code == 404, refused.text  # not his, and nobody handed it to him

    given = await hand_over(api, "ana", "bob", ["delete_file"])
    assert (given["from"], given["to"], given["tools"], given["live"]) == ("ana", "bob", ["delete_file"], True)
    async with api.as_("bob") as bob:
        listed = (await bob.get("/people/me/delegations")).json()
    assert [row["id"] for row in listed["received"]] == [given["id"]] and listed["given"] == []

    rows = await eventually(lambda: inbox(api, "bob"), lambda rows: any(row["session_id"] == session for row in rows))
    assert [(row["call_id"], row["for"]) for row in rows if row["session_id"] == session] == [(item["call_id"], "ana")]

    approved = await decide(api, "bob", session, item["call_id"])
    assert approved.status_code == 200, approved.text
    assert approved.json()["outcome"] == "approved"
    rows = await audit(api, "carol", session)
    [row] = [row for row in rows if row["event"] == "approved"]
    assert (row["by"], row["for"], row["via"]) == ("bob", "ana", "api")
    assert not (api.agent.workspace / "notes.txt").exists()

    async with api.as_("ana") as ana:
        ended = await ana.delete(f"/people/me/delegations/{given['id']}")
    assert ended.status_code == 200, ended.text
    assert ended.json()["live"] is False
    again = await api.start("carol", "please delete todo.txt")
    late = await decide(api, "bob", again["session_id"], again["pending"][0]["call_id"])
    assert late.status_code == 403, late.text
    assert f"the hand-over {given['id']} ended at" in late.json()["detail"]
    assert [row for row in await inbox(api, "bob") if row["session_id"] == again["session_id"]] == []


async def test_bob_claims_and_releases_for_ana_while_she_is_away_and_claims_nothing_after(policy_api: Api) -> None:
    """A stand-in takes and gives back a call as they decide it: through the same access check, the
    API signing `by: bob, for: ana`, the audit naming both. Once the hand-over ends, bob claims
    nothing more, and may still give back a claim he holds."""
    api = policy_api
    started = await api.start("carol", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    given = await hand_over(api, "ana", "bob", ["delete_file"])

    claimed = await decide(api, "bob", session, call, "claim")
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["claimed_by"] == "bob"
    held = await decide(api, "ana", session, call)
    assert held.status_code == 409 and "claimed by bob" in held.json()["detail"], held.text
    released = await decide(api, "bob", session, call, "release")
    assert released.status_code == 200 and released.json()["claimed_by"] is None, released.text
    assert (await decide(api, "bob", session, call, "claim")).status_code == 200
    approved = await decide(api, "bob", session, call)
    assert approved.status_code == 200 and approved.json()["outcome"] == "approved", approved.text
    rows = [(row["event"], row["by"], row["for"]) for row in await audit(api, "carol", session)
            if row["event"] in ("claimed", "released", "approved")]
    assert rows == [("claimed", "bob", "ana"), ("released", "bob", "ana"), ("claimed", "bob", "ana"),
                    ("approved", "bob", "ana")]

    again = await api.start("carol", "please delete todo.txt")
    second = again["pending"][0]["call_id"]
    assert (await decide(api, "bob", again["session_id"], second, "claim")).status_code == 200
    async with api.as_("ana") as ana:
        assert (await ana.delete(f"/people/me/delegations/{given['id']}")).status_code == 200
    for verb in ("approve", "claim"):
        late = await decide(api, "bob", again["session_id"], second, verb)
        assert late.status_code == 403, late.text
        assert f"the hand-over {given['id']} ended at" in late.json()["detail"]
    given_back = await decide(api, "bob", again["session_id"], second, "release")
    assert given_back.status_code == 200 and given_back.json()["claimed_by"] is None, given_back.text
    late = await decide(api, "bob", again["session_id"], second, "claim")
    assert late.status_code == 403 and f"the hand-over {given['id']} ended at" in late.json()["detail"], late.text
    assert (await decide(api, "ana", again["session_id"], second)).status_code == 200


async def test_a_stand_in_gives_back_only_a_claim_they_hold_during_and_after_the_hand_over(policy_api: Api) -> None:
    """Releasing for someone, or after a hand-over ended, frees only one's own claim: dave's claim
    on a call ana and dave decide stands against bob, ana's stand-in, while the hand-over lasts and
    after it ended; dave still decides the call."""
    api = policy_api
    started = await api.start("carol", "send an email to team@example.com about lunch saying noon")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    given = await hand_over(api, "ana", "bob", ["send_email"])
    assert (await decide(api, "dave", session, call, "claim")).status_code == 200
    live = await decide(api, "bob", session, call, "release")
    assert live.status_code == 409 and "only they can release it" in live.json()["detail"], live.text
    async with api.as_("ana") as ana:
        assert (await ana.delete(f"/people/me/delegations/{given['id']}")).status_code == 200
    ended = await decide(api, "bob", session, call, "release")
    assert ended.status_code == 403 and f"the hand-over {given['id']} ended at" in ended.json()["detail"], ended.text
    [item] = await query(api.agent.client.get_workflow_handle(session), "pending")
    assert item["claimed_by"] == "dave", item
    approved = await decide(api, "dave", session, call)
    assert approved.status_code == 200 and approved.json()["outcome"] == "awaiting_more_approvals", approved.text


async def test_the_session_refuses_a_signed_stand_in_claim_the_rules_do_not_allow(policy_api: Api) -> None:
    """A claim, too, is checked by the session for both people: a proof the API signed for a
    delegator who may not decide the call claims nothing."""
    api = policy_api
    started = await api.start("carol", "please delete notes.txt")
    handle = api.agent.client.get_workflow_handle(started["session_id"])
    [item] = await query(handle, "pending")
    claim = claim_proof(handle.id, item, (await handle.describe()).run_id, "bob", "dave")
    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await handle.execute_update("claim_update", claim)
    assert "bob decides for dave, and dave may not decide delete_file" in str(failure.value.cause), failure.value.cause
    [still] = await query(handle, "pending")
    assert still.get("claimed_by") is None


def claim_proof(handle_id: str, item: dict[str, Any], run_id: str | None, by: str, for_person: str) -> dict[str, Any]:
    """A claim of `item` by `by` for `for_person`, with the proof the API would sign for it."""
    key_id, key = api_signing_key()
    payload = {"call_id": item["call_id"], "by": by, "via": "api"}
    proof = sign_decision(key, key_id, session_id=handle_id, call_id=item["call_id"], action="claim", by=by,
                          args_sha256=item["args_sha256"], decision_sha256=parse_decision("claim", payload).digest(),
                          run_id=run_id, chain=run_id, for_=for_person)
    return {**payload, "proof": proof}


async def test_a_stand_in_claim_sent_as_a_signal_holds_the_call_against_the_delegator(policy_api: Api) -> None:
    """A claim signed `by: bob, for: ana` and sent as a signal is taken as its Update is, and then
    holds the call against ana herself. A run started before stand-ins' claims (the run-start
    patch `claims-by-stand-ins`) judged bob as himself and refused it, so ana's approval went
    through: the corpus keeps such a run (tests/histories/test_before_claims_by_stand_ins*), and it
    replays as it was recorded."""
    api = policy_api
    started = await api.start("carol", "please delete notes.txt")
    handle = api.agent.client.get_workflow_handle(started["session_id"])
    [item] = await query(handle, "pending")
    await hand_over(api, "ana", "bob", ["delete_file"])
    await handle.signal("claim", claim_proof(handle.id, item, (await handle.describe()).run_id, "bob", "ana"))
    rows = await eventually(lambda: audit(api, "carol", handle.id),
                            lambda rows: any(row["event"] in ("claimed", "refused") for row in rows))
    assert [(row["event"], row["by"], row["for"]) for row in rows if row["event"] in ("claimed", "refused")] == \
        [("claimed", "bob", "ana")], rows
    held = await decide(api, "ana", handle.id, item["call_id"])
    assert held.status_code == 409 and "claimed by bob" in held.json()["detail"], held.text


async def test_four_eyes_holds_for_the_stand_in_and_for_whom_they_stand_in(policy_api: Api) -> None:
    api = policy_api
    await hand_over(api, "ana", "bob", ["delete_file"])
    own = await api.start("bob", "please delete notes.txt")
    refused = await decide(api, "bob", own["session_id"], own["pending"][0]["call_id"])
    assert refused.status_code in (403, 404), refused.text
    assert [row for row in await inbox(api, "bob") if row["session_id"] == own["session_id"]] == []
    rejected = await decide(api, "bob", own["session_id"], own["pending"][0]["call_id"], "reject")
    assert rejected.status_code == 200, rejected.text  # he may still withdraw his own request for ana
    [row] = [row for row in await audit(api, "bob", own["session_id"]) if row["event"] == "rejected"]
    assert (row["by"], row["for"]) == ("bob", "ana")

    hers = await api.start("ana", "please delete notes.txt")
    through_bob = await decide(api, "bob", hers["session_id"], hers["pending"][0]["call_id"])
    assert through_bob.status_code in (403, 404), through_bob.text  # ana's own request, through her stand-in
    assert (api.agent.workspace / "notes.txt").exists()


async def test_the_session_refuses_a_signed_stand_in_decision_the_rules_do_not_allow(policy_api: Api) -> None:
    """The API signs `for` only when the rules allow it; the session checks again, with the same rules."""
    api = policy_api
    own = await api.start("bob", "please delete notes.txt")
    handle = api.agent.client.get_workflow_handle(own["session_id"])
    [item] = await query(handle, "pending")
    description = await handle.describe()
    key_id, key = api_signing_key()

    def proof(for_person: str) -> str:
        return sign_decision(key, key_id, session_id=own["session_id"], call_id=item["call_id"], action="approve",
                             by="bob", args_sha256=item["args_sha256"],
                             decision_sha256=parse_decision("approve", {"via": "api"}).digest(),
                             run_id=description.run_id, chain=description.run_id, for_=for_person)

    for for_person, reason in (("ana", "four-eyes rule: bob asked for this call"), ("dave", "dave may not decide")):
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update("approve_update", {"call_id": item["call_id"], "by": "bob", "via": "api",
                                                           "proof": proof(for_person)})
        assert reason in str(failure.value.cause), failure.value.cause
    assert (api.agent.workspace / "notes.txt").exists()


async def test_a_hand_over_covers_its_tools_and_counts_its_giver_once(policy_api: Api) -> None:
    api = policy_api
    await hand_over(api, "ana", "dave", ["send_email"])
    deleting = await api.start("carol", "please delete notes.txt")
    other_tool = await decide(api, "dave", deleting["session_id"], deleting["pending"][0]["call_id"])
    assert other_tool.status_code == 404, other_tool.text

    await hand_over(api, "ana", "bob", ["send_email"])
    mailing = await api.start("carol", "send an email to team@example.com about lunch saying noon")
    session, [item] = mailing["session_id"], mailing["pending"]
    vote = await decide(api, "bob", session, item["call_id"])
    assert vote.status_code == 200, vote.text
    assert vote.json()["approvals"] == ["ana"]
    twice = await decide(api, "ana", session, item["call_id"])
    assert twice.status_code == 403, twice.text
    assert "ana already approved" in twice.json()["detail"]
    done = await decide(api, "carol", session, item["call_id"])
    assert done.status_code == 200 and done.json()["outcome"] == "approved", done.text


async def test_hand_overs_only_where_the_policy_allows_them(policy_api: Api) -> None:
    api = policy_api
    barred = await hand_over(api, "ana", "bob", ["draft_email"], status=403)
    assert "draft_email" in barred["detail"]
    everything = await hand_over(api, "ana", "bob", status=403)
    assert "only of some tools" in everything["detail"]
    stranger = await hand_over(api, "ana", "mallory", ["delete_file"], status=422)
    assert "mallory" in stranger["detail"]
    past = await hand_over(api, "ana", "bob", ["delete_file"], status=422,
                           until=(datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat())
    assert "not in the future" in past["detail"]
    too_long = await hand_over(api, "ana", "bob", ["delete_file"], status=422,
                               until=(datetime.now(timezone.utc) + timedelta(days=31)).isoformat())
    assert "at most 30 days" in too_long["detail"]
    async with api.as_("bob") as bob:
        assert (await bob.delete("/people/me/delegations/so-unknown")).status_code == 404


async def delegate(api: Api, person: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python starter.py delegate ...` as `person`, against the running API."""
    env = {**os.environ, "HITL_API_URL": api.base, "HITL_API_TOKEN": token_of(person)}
    command = [sys.executable, str(ROOT / "starter.py"), "delegate", *args]
    return await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


async def test_the_command_line_hands_over_lists_and_ends(policy_api: Api) -> None:
    api = policy_api
    given = await delegate(api, "ana", "bob", "--until", in_a_day(), "--tool", "delete_file")
    assert given.returncode == 0, given.stderr
    made = json.loads(given.stdout)
    assert (made["from"], made["to"], made["tools"]) == ("ana", "bob", ["delete_file"])
    listed = await delegate(api, "bob", "--list")
    assert [row["id"] for row in json.loads(listed.stdout)["received"]] == [made["id"]]
    barred = await delegate(api, "ana", "bob", "--until", in_a_day(), "--tool", "draft_email")
    assert barred.returncode == 1 and "403" in barred.stderr and "draft_email" in barred.stderr
    ended = await delegate(api, "ana", "--end", made["id"])
    assert ended.returncode == 0 and json.loads(ended.stdout)["live"] is False, ended.stderr


LINK_KEY = link_key_from_seed(os.urandom(32))


def mail_to(folder: Path, inbox: Inbox) -> Mailer:
    """The worker's mail channel: the SMTP server on loopback, and an address for ana, bob and dave."""
    path = folder / "channels.json"
    people = {person: {"email": f"{person}@example.com"} for person in ("ana", "bob", "dave")}
    path.write_text(json.dumps({"public_url": "https://hitl.example.com", "people": people,
                                "email": {"smtp_url": inbox.url, "from": "agent@example.com"}}))
    environ = {"HITL_CHANNELS": str(path)}
    mail = mailer(channels_from_env(environ), environ, lambda: LINK_KEY)
    assert mail is not None
    return mail


async def notified(session: Any) -> bool:
    """Whether the session's history shows its notify activity completed (every mail sent)."""
    scheduled: set[int] = set()
    async for event in session.fetch_history_events():
        if event.activity_task_scheduled_event_attributes.activity_type.name == NOTIFY.name:
            scheduled.add(event.event_id)
        if event.activity_task_completed_event_attributes.scheduled_event_id in scheduled:
            return True
    return False


async def test_a_pause_for_ana_reaches_her_stand_in_by_mail(env: WorkflowEnvironment, workspace: Path, tmp_path: Path,
                                                           signing_key: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The worker's notify activity reads the book of stand-ins: bob, ana's stand-in for
    delete_file, is mailed the card too, with links bound to him (the API takes them as his
    decisions for ana); a hand-over the API did not seal reaches nobody."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    monkeypatch.setenv("HITL_POLICY", str(path))
    key_id, key = api_signing_key()
    queue = "mail-stand-in"

    def hand_over(stand_in_id: str, to: str, sealed: bool) -> dict[str, Any]:
        stand_in = StandIn.model_validate({"id": stand_in_id, "from": "ana", "to": to, "tools": ["delete_file"],
                                           "since": datetime.now(timezone.utc), "until": in_a_day()})
        if sealed:
            stand_in.seal = f"{key_id}.{base64.urlsafe_b64encode(key.sign(stand_in.sealed_body())).decode()}"
        return stand_in.model_dump(mode="json")

    with mail_server() as inbox:
        async with build_worker(env.client, queue, OfflineModel(), workspace, message_channels=[mail_to(tmp_path, inbox)]):
            start = WithStartWorkflowOperation(StandInBook.run, id=book_id(queue), task_queue=queue,
                                               id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
            await env.client.execute_update_with_start_workflow(StandInBook.give, hand_over("so-1", "bob", True),
                                                                start_workflow_operation=start)
            await env.client.get_workflow_handle(book_id(queue)).execute_update(StandInBook.give,
                                                                                hand_over("so-2", "dave", False))
            session = await Agent(env.client, queue, workspace).start("please delete notes.txt", by="carol",
                                                                       verified_decisions=False)
            mails = await eventually(lambda: asyncio.sleep(0, inbox.cards()), lambda seen: len(seen) >= 2)
            await eventually(lambda: notified(session), bool)
            mails = inbox.cards()
            await session.signal("cancel", {})
            await session.result()
    assert sorted(mail["To"] for mail in mails) == ["ana@example.com", "bob@example.com"]
    [to_bob] = [mail for mail in mails if mail["To"] == "bob@example.com"]
    claims = read_link_token(LINK_KEY, links_in(to_bob)["Approve"].rsplit("/", 1)[1], now=0)
    assert (claims.person, claims.session_id) == ("bob", session.id)
