"""Single sign-on: a person signed in at a real OpenID provider (tests/js/oidc_provider.mjs) decides
through the API with the provider's JWT access token, as the person its `email` claim names; a
token the provider did not sign for this API decides nothing, and says why in one line; keys the
provider rotates are followed without a restart; the token file keeps working beside it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from joserfc.jwk import RSAKey
from temporalio.testing import WorkflowEnvironment

from hitl.api.app import signing_key as key_of_the_api
from hitl.api.gateway import chain_of
from hitl.api.oidc import OpenIDProvider
from hitl.api.stream_access import SIGN_IN_EXPIRED, SIGNED_OUT
from hitl.api.web_sign_in import LOGIN_COOKIE, SESSION_COOKIE, WebSession, WebSignIn
from tests.support.api_server import Api, EventStream, new_id, of_type, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.openid import AUDIENCE, OTHER_AUDIENCE, OpenID, openid, running_provider  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent
from tests.integration.test_cli import temporal
from workflows.decisions import parse_decision
from workflows.proofs import sign_decision

BOB = "bob@example.com"


# The payments team lives in the provider: the policy names the group, not its members.
POLICY = {"groups_from_identity": True, "groups": {"finance": ["@payments", "dave"]},
          "tools": {"delete_file": {"approval": "always", "approvers": ["@finance"]}}}


async def serving_with_provider(env: WorkflowEnvironment, workspace: Path, openid: OpenID, **options: Any) -> AsyncIterator[Api]:
    """The API with its token file and the provider's tokens; no clock leeway, so expiry is prompt,
    and an unknown key id fetches the keys again at most once a second."""
    provider = OpenIDProvider(openid.issuer, AUDIENCE, leeway=0, refetch_seconds=1)
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, openid=provider, **options) as running:
            yield running


@pytest.fixture
async def sso_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID) -> AsyncIterator[Api]:
    async for running in serving_with_provider(env, workspace, openid):
        yield running


@pytest.fixture
async def groups_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """The API and the worker under a policy that takes groups from the provider's tokens."""
    (tmp_path / "policy.json").write_text(json.dumps(POLICY))
    monkeypatch.setenv("HITL_POLICY", str(tmp_path / "policy.json"))
    async for running in serving_with_provider(env, workspace, openid, policy="from HITL_POLICY"):
        yield running


def with_token(api: Api, token: str) -> Any:
    return api.as_(None, {"Authorization": f"Bearer {token}"})


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return tuple(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))  # type: ignore[return-value]
                 for part in token.split(".")[:2])


def b64(data: dict[str, Any] | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def test_a_person_signed_in_at_the_provider_decides_an_approval_as_their_email(sso_api: Api, openid: OpenID) -> None:
    started = await sso_api.start("ana", "please delete notes.txt", approvers={"delete_file": [BOB]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    token = await openid.token_for("bob")

    async with with_token(sso_api, token) as bob:
        assert (await bob.get("/me")).json()["person"] == BOB
        approved = await bob.post(f"/sessions/{session}/calls/{call}/approve", json={"by": "ana"})
        assert approved.status_code == 200, approved.text
        assert approved.json()["outcome"] == "approved"
    async with sso_api.as_("ana") as ana:  # the token file works beside the provider
        await eventually(lambda: ana.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        audit = (await ana.get(f"/sessions/{session}/audit")).json()
    assert [event["by"] for event in audit if event["event"] == "approved"] == [BOB]
    assert not (sso_api.agent.workspace / "notes.txt").exists()


async def test_tokens_the_provider_did_not_sign_for_this_api_decide_nothing_and_say_why(sso_api: Api, openid: OpenID) -> None:
    started = await sso_api.start("ana", "please delete notes.txt", approvers={"delete_file": [BOB]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    real = await openid.token_for("carol")
    header, claims = parts(real)
    signing_input, signature = real.rsplit(".", 1)[0], real.rsplit(".", 1)[1]
    [public] = [key for key in await openid.public_keys() if key["kid"] == header["kid"]]
    public_pem = RSAKey.import_key(public).as_pem(private=False)

    def hs256(secret: bytes) -> str:
        body = f"{b64({**header, 'alg': 'HS256'})}.{b64({**claims, 'email': BOB})}"
        return f"{body}.{b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())}"

    with running_provider(openid.keys) as impostor:  # the same keys, another issuer
        from_another_issuer = await impostor.token_for("bob")
    refused = {
        "signature is not the provider's": f"{b64(header)}.{b64({**claims, 'email': BOB})}.{signature}",
        "algorithm 'none' is not accepted": f"{b64({**header, 'alg': 'none'})}.{b64({**claims, 'email': BOB})}.",
        "algorithm 'HS256' is not accepted": hs256(public_pem),
        "for another audience": await openid.token_for("bob", resource=OTHER_AUDIENCE),
        "issued by another issuer": from_another_issuer,
        "a key the provider does not publish": f"{b64({**header, 'kid': 'made-up'})}.{signing_input.split('.')[1]}.{signature}",
    }
    for reason, token in refused.items():
        async with with_token(sso_api, token) as someone:
            answer = await someone.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert answer.status_code == 401, (reason, answer.text)
        detail = answer.json()["detail"]
        assert reason in detail and "\n" not in detail, (reason, detail)
    async with sso_api.as_("ana") as ana:
        assert [item["call_id"] for item in (await ana.get(f"/sessions/{session}/pending")).json()] == [call]
    assert (sso_api.agent.workspace / "notes.txt").exists()


async def test_a_token_is_refused_once_it_expires(sso_api: Api, openid: OpenID) -> None:
    token = await openid.token_for("bob", client="short-lived")  # six seconds
    async with with_token(sso_api, token) as bob:
        assert (await bob.get("/me")).json()["person"] == BOB
        expired = await eventually(lambda: bob.get("/me"), lambda answer: answer.status_code != 200)
    assert expired.status_code == 401
    assert expired.json()["detail"] == "token refused: it has expired (exp)"


async def test_keys_the_provider_rotates_are_followed_without_a_restart(sso_api: Api, openid: OpenID) -> None:
    before = await openid.token_for("bob")
    async with with_token(sso_api, before) as bob:
        assert (await bob.get("/me")).status_code == 200  # the API has fetched the provider's keys now
    new_kid = await openid.rotate()
    after = await openid.token_for("bob")
    assert parts(after)[0]["kid"] == new_kid != parts(before)[0]["kid"]
    async with with_token(sso_api, after) as bob:
        # At most one fetch a second for an unknown key: the first try may come too soon after the last.
        answer = await eventually(lambda: bob.get("/me"), lambda answer: answer.status_code == 200)
    assert answer.json()["person"] == BOB
    async with with_token(sso_api, before) as bob:  # the old key is still published: its tokens still hold
        assert (await bob.get("/me")).status_code == 200


async def test_streams_opened_with_a_token_end_when_the_token_expires(sso_api: Api, openid: OpenID) -> None:
    """By its bearer token, and by a ticket bought with it (as the web page's EventSource opens one)."""
    started = await sso_api.start("ana", "please delete notes.txt", approvers={"delete_file": [BOB]})
    session = started["session_id"]
    token = await openid.token_for("bob", client="short-lived")
    async with with_token(sso_api, token) as bob, sso_api.as_(None) as page:
        ticket = (await bob.post(f"/sessions/{session}/events/ticket")).json()
        async with bob.stream("GET", f"/sessions/{session}/events") as by_token, \
                page.stream("GET", ticket["url"]) as by_ticket:
            for response in (by_token, by_ticket):
                assert response.status_code == 200, await response.aread()
                seen = await EventStream(response).read_until(lambda seen: bool(of_type(seen, "end")))
                [end] = of_type(seen, "end")
                assert end["data"] == {"access_ended": True, "problem": SIGN_IN_EXPIRED}
    assert (sso_api.agent.workspace / "notes.txt").exists()


async def test_a_stream_the_page_opened_ends_when_the_page_signs_out_elsewhere(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID) -> None:
    """Bob's inbox is open in two tabs, signed in through the provider; he signs out in the other
    one. The first tab's event stream (opened by a ticket bought with the cookie) ends with the
    sign-out, and the session's next message never reaches it, though his token lasts an hour."""
    provider = OpenIDProvider(openid.issuer, AUDIENCE)
    web = WebSignIn(provider, "web", "openid email api")
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, openid=provider, web_sign_in=web) as api:
            started = await api.start("ana", "please delete notes.txt", participants=[BOB])
            session = started["session_id"]
            web.sessions["bobs-page"] = WebSession(await provider.identity(await openid.token_for("bob")), "csrf")
            page = api.as_(None, {"Sec-Fetch-Site": "same-origin", "X-CSRF-Token": "csrf"})
            page.cookies.set(SESSION_COOKIE, "bobs-page")
            async with page:
                ticket = (await page.post(f"/sessions/{session}/events/ticket")).json()
                async with page.stream("GET", ticket["url"]) as response:
                    assert response.status_code == 200
                    assert (await page.post("/auth/sign-out")).status_code == 204
                    async with api.as_("ana") as ana:
                        sent = await ana.post(f"/sessions/{session}/messages", json={"text": "the secret is 42"})
                        assert sent.status_code < 300, sent.text
                    seen = await EventStream(response).read_until(lambda seen: bool(of_type(seen, "end")))
            assert "the secret is 42" not in json.dumps(seen)
            [end] = of_type(seen, "end")
            assert end["data"] == {"access_ended": True, "problem": SIGNED_OUT}


async def test_the_groups_a_token_vouches_for_decide_what_the_policy_gives_that_group(groups_api: Api, openid: OpenID) -> None:
    """ana is in "payments" only at the provider; the policy's @finance includes @payments. The API
    lets her decide, and so does the session, from the groups her decision's proof carries."""
    started = await groups_api.start("olga", "please delete notes.txt")
    session, item = started["session_id"], started["pending"][0]
    assert item["approvers"] == ["@finance", "dave"]  # the group's name stays, for its provider's members
    bob = await openid.token_for("bob")  # in "staff" only
    async with with_token(groups_api, bob) as outsider:
        assert (await outsider.get("/inbox")).json() == []
        refused = await outsider.post(f"/sessions/{session}/calls/{item['call_id']}/approve", json={})
        assert refused.status_code == 404, refused.text  # no role in the session at all

    # The session checks on its own: the API's key vouching for bob, without a group, is refused.
    key_id, key = key_of_the_api()
    decision = {"call_id": item["call_id"], "by": BOB}
    described = await groups_api.agent.client.get_workflow_handle(session).describe()
    proof = sign_decision(key, key_id, session_id=session, call_id=item["call_id"], action="approve", by=BOB,
                          args_sha256=item["args_sha256"], run_id=described.run_id, chain=chain_of(described),
                          decision_sha256=parse_decision("approve", decision).digest())
    forged = json.dumps({**decision, "proof": proof})
    update = await temporal(groups_api.agent, "workflow", "update", "execute", "--workflow-id", session,
                            "--name", "approve_update", "--input", forged)
    assert update.returncode != 0 and f"{BOB} may not decide delete_file" in update.stderr, update.stderr

    ana = await openid.token_for("ana")  # in "payments" and "staff"
    async with with_token(groups_api, ana) as member:
        assert [row["call_id"] for row in (await member.get("/inbox")).json()] == [item["call_id"]]
        approved = await member.post(f"/sessions/{session}/calls/{item['call_id']}/approve", json={})
        assert approved.status_code == 200, approved.text
        assert approved.json()["outcome"] == "approved"
    async with groups_api.as_("olga") as owner:
        await eventually(lambda: owner.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        audit = (await owner.get(f"/sessions/{session}/audit")).json()
    assert [event["by"] for event in audit if event["event"] == "approved"] == ["ana@example.com"]
    assert not (groups_api.agent.workspace / "notes.txt").exists()


async def test_an_ag_ui_run_with_a_token_of_the_provider_pauses_and_resumes_as_its_person(sso_api: Api, openid: OpenID) -> None:
    """The other doors take the same credential: AG-UI's run follows the session with the token's
    reader (held until its exp), not as a token of the file that was taken away."""
    thread, token = new_id(), await openid.token_for("bob")

    async def run(body: dict[str, Any]) -> list[dict[str, Any]]:
        async with with_token(sso_api, token) as bob, bob.stream("POST", "/ag-ui", json={"threadId": thread, **body}) as answer:
            assert answer.status_code == 200, await answer.aread()
            return [json.loads(line[6:]) async for line in answer.aiter_lines() if line.startswith("data: ")]

    asked = await run({"runId": "run-1", "messages": [{"id": "m1", "role": "user", "content": "please delete notes.txt"}]})
    assert asked[-1]["type"] == "RUN_FINISHED" and asked[-1]["outcome"]["interrupts"][0]["id"] == "call_1", asked[-1]
    approved = await run({"runId": "run-2", "messages": [], "resume": [
        {"interruptId": "call_1", "status": "resolved", "payload": {"decision": "approve"}}]})
    assert approved[-1]["type"] == "RUN_FINISHED", approved[-1]
    assert not (sso_api.agent.workspace / "notes.txt").exists()
    async with with_token(sso_api, token) as bob:
        audit = (await bob.get(f"/sessions/{thread}/audit")).json()
    assert [(event["by"], event["via"]) for event in audit if event["event"] == "approved"] == [(BOB, "ag-ui")]


async def test_sign_ins_that_never_come_back_cannot_pile_up(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID) -> None:
    """Anyone may start a sign-in. Past the pending limit the oldest unfinished one is forgotten,
    so requests that never return from the provider cannot fill the API's memory; its browser
    is told to start again."""
    provider = OpenIDProvider(openid.issuer, AUDIENCE)
    web = WebSignIn(provider, "web", "openid email api", pending_at_most=3)
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, openid=provider, web_sign_in=web) as api:
            async with api.as_(None) as anyone:
                started = [await anyone.get("/auth/sign-in") for _ in range(5)]
                states = [answer.cookies[LOGIN_COOKIE] for answer in started]
                assert all(answer.status_code == 303 for answer in started)
                assert list(web.logins) == states[2:]
                anyone.cookies.set(LOGIN_COOKIE, states[0], path="/auth")
                forgotten = await anyone.get("/auth/callback", params={"code": "any", "state": states[0]})
    assert forgotten.status_code == 400 and "start again at /auth/sign-in" in forgotten.text
