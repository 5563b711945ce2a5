"""Single sign-on: a person signed in at a real OpenID provider (tests/js/oidc_provider.mjs) decides
through the API with the provider's JWT access token, as the person its `email` claim names; a
token the provider did not sign for this API decides nothing, and says why in one line; keys the
provider rotates are followed without a restart; the token file keeps working beside it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx

import pytest
from joserfc.jwk import RSAKey
from temporalio.testing import WorkflowEnvironment

from hitl.api.app import signing_key as key_of_the_api
from hitl.api.auth import TokenBook
from hitl.api.gateway import chain_of
from hitl.api.oidc import OpenIDProvider
from hitl.devserver import free_port
from hitl.api.stream_access import SIGN_IN_EXPIRED, SIGNED_OUT
from hitl.api.state.memory import MemoryState
from hitl.api.web_sign_in import LOGIN_COOKIE, SESSION_COOKIE, WebSession, WebSignIn, keep_session
from tests.support.api_server import PEOPLE, Api, EventStream, new_id, of_type, serving, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.openid import AUDIENCE, OTHER_AUDIENCE, OpenID, openid, running_provider, through_login  # noqa: F401  (fixtures)
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
    provider = provider_of(openid)
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, openid=provider, **options) as running:
            yield running


def provider_of(openid: OpenID, person_claim: str = "email") -> OpenIDProvider:
    return OpenIDProvider(openid.issuer, AUDIENCE, person_claim=person_claim, leeway=0, refetch_seconds=1)


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
            await keep_session(api.app.state.api_state, "bobs-page",
                               WebSession(await provider.identity(await openid.token_for("bob")), "csrf"))
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
    web = WebSignIn(provider, "web", "openid email api")
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, openid=provider, web_sign_in=web, api_state=MemoryState({"login": 3})) as api:
            async with api.as_(None) as anyone:
                started = [await anyone.get("/auth/sign-in") for _ in range(5)]
                states = [answer.cookies[LOGIN_COOKIE] for answer in started]
                assert all(answer.status_code == 303 for answer in started)
                came_back = []
                for state in (states[0], states[2]):
                    anyone.cookies.clear()
                    anyone.cookies.set(LOGIN_COOKIE, state, path="/auth")
                    came_back.append(await anyone.get("/auth/callback", params={"code": "any", "state": state}))
    forgotten, kept = came_back
    assert forgotten.status_code == 400 and "start again at /auth/sign-in" in forgotten.text
    assert kept.status_code == 401 and "sign-in failed" in kept.text  # kept: the provider refuses the made-up code


# ------------------------------------------------------------------ who a provider's token may name

# The token file's operator: a short name, as token files name people.
OPS_POLICY = {"operators": ["ops"]}
TOKEN_FILE = TokenBook({token_of(person): person for person in (*PEOPLE, "ops")}, "test tokens")


@pytest.fixture
async def operator_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, openid: OpenID, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """The API (and its worker) with `ops` an operator of the policy and a person of the token file."""
    (tmp_path / "policy.json").write_text(json.dumps(OPS_POLICY))
    monkeypatch.setenv("HITL_POLICY", str(tmp_path / "policy.json"))
    async for running in serving_with_provider(env, workspace, openid, policy="from HITL_POLICY", tokens=TOKEN_FILE):
        yield running


async def refusal_of(api: Api, token: str, path: str = "/me") -> str:
    """The one line the API answers a refused token with (a 401)."""
    async with with_token(api, token) as someone:
        answer = await someone.get(path)
    assert answer.status_code == 401, answer.text
    detail = answer.json()["detail"]
    assert "\n" not in detail
    return str(detail)


async def test_an_email_the_provider_has_not_verified_names_nobody(operator_api: Api, openid: OpenID) -> None:
    """Mallory's account at the provider says her email is "ops", unverified: she is not the token
    file's operator ops (who reads every session), nor anyone else; nor is an unverified real address."""
    started = await operator_api.start("olga", "please delete notes.txt")
    session = started["session_id"]
    async with operator_api.as_("ops") as ops:  # the real operator reads it
        assert (await ops.get(f"/sessions/{session}")).status_code == 200
    unverified = {"mallory": {"email": "ops", "email_verified": False},
                  "mallory2": {"email": "dave@example.com", "email_verified": False},
                  "mallory3": {"email": "erin@example.com"},  # the provider says nothing of it
                  "mallory4": {"email": "erin@example.com", "email_verified": "true"}}  # not the JSON true
    for login, claims in unverified.items():
        await openid.add_account(login, **claims)
        token = await openid.token_for(login)
        for path in ("/me", f"/sessions/{session}"):
            detail = await refusal_of(operator_api, token, path)
            assert detail == "token refused: its email is not verified by the provider (email_verified is not true)", \
                (login, detail)
    async with with_token(operator_api, await openid.token_for("bob")) as bob:  # a verified one still is its person
        assert (await bob.get("/me")).json()["person"] == BOB


async def test_a_provider_person_never_becomes_a_token_file_person_by_spelling(
        env: WorkflowEnvironment, signing_key: str, openid: OpenID) -> None:
    """With the email claim, only an email address is a person: "ops", verified or not, is the
    token file's operator's name, and "@payments" a group's. With another claim (the provider's own
    names), a name of the token file is refused, and so is a group's spelling; others are people."""
    await openid.add_account("mallory", email="ops", email_verified=True, preferred_username="ana")
    await openid.add_account("mallet", email="@payments", email_verified=True, preferred_username="@payments")
    await openid.add_account("dave", email="dave@example.com", email_verified=True, preferred_username="dave.k")
    mallory, mallet, dave = [await openid.token_for(login) for login in ("mallory", "mallet", "dave")]

    async with serving(None, openid=provider_of(openid), tokens=TOKEN_FILE) as by_email:
        assert await refusal_of(by_email, mallory) == "token refused: its email 'ops' is not an email address"
        assert await refusal_of(by_email, mallet) == "token refused: its email '@payments' is not an email address"
        async with with_token(by_email, dave) as someone:
            assert (await someone.get("/me")).json()["person"] == "dave@example.com"

    async with serving(None, openid=provider_of(openid, "preferred_username"), tokens=TOKEN_FILE) as by_username:
        assert await refusal_of(by_username, mallory) == (
            "token refused: its preferred_username 'ana' is a person of the token file (HITL_API_TOKENS); "
            "the provider's people and the token file's are kept apart")
        assert await refusal_of(by_username, mallet) == (
            "token refused: its preferred_username '@payments' starts with '@', as the policy names groups")
        async with with_token(by_username, dave) as someone:
            assert (await someone.get("/me")).json()["person"] == "dave.k"


async def test_a_token_file_person_named_by_a_verified_address_is_the_providers_person(signing_key: str, openid: OpenID) -> None:
    """With sign-in by email, the operator may give an address a token of its own: a provider token
    for that verified address is the same person, not refused as a stranger to the file."""
    tokens = TokenBook({token_of("bob"): BOB, token_of("ops"): "ops"}, "tokens.json")
    async with serving(None, openid=provider_of(openid), tokens=tokens) as api:
        async with with_token(api, await openid.token_for("bob")) as bob:
            assert (await bob.get("/me")).json()["person"] == BOB
        async with with_token(api, token_of("bob")) as bob_by_file:
            assert (await bob_by_file.get("/me")).json()["person"] == BOB


async def test_a_token_must_end_within_the_longest_lifetime_a_token_may_have(signing_key: str, openid: OpenID) -> None:
    """Tokens the provider's own key signed, with an `exp` no sane provider sets: each refused with
    its reason (a day is the longest a token may live, HITL_OIDC_MAX_TOKEN_SECONDS)."""
    now = int(time.time())
    person = {"iss": openid.issuer, "aud": AUDIENCE, "email": BOB, "email_verified": True}
    async with serving(None, openid=provider_of(openid)) as api:
        async with with_token(api, openid.signed({**person, "iat": now, "exp": now + 3600})) as bob:
            assert (await bob.get("/me")).json()["person"] == BOB  # the key signs what the provider would
        refused = [
            ("its exp is more than 86400 seconds from now", {"iat": now, "exp": 1e300}),
            ("its exp is more than 86400 seconds from now", {"exp": 10 ** 400}),
            ("its exp is more than 86400 seconds from now", {"exp": now + 2 * 86400}),
            ("its exp is more than 86400 seconds after its iat", {"iat": now - 86400, "exp": now + 3600}),
            ("its exp is not a number of seconds (NumericDate)", {"exp": str(now + 3600)}),
            ("its exp is not a number of seconds (NumericDate)", {"exp": True}),
            ("its iat is not a number of seconds (NumericDate)", {"iat": "now", "exp": now + 3600}),
            ("its nbf is not a number of seconds (NumericDate)", {"nbf": [now], "exp": now + 3600}),
        ]
        for reason, times in refused:
            assert await refusal_of(api, openid.signed({**person, **times})) == f"token refused: {reason}", times


async def test_a_sign_in_is_ended_only_by_the_browser_that_began_it(signing_key: str, openid: OpenID) -> None:
    """Someone who learns the state of bob's sign-in (from a log, a referrer) and calls back with it
    first, from a browser of their own, is refused; bob's own browser still signs him in with it."""
    provider = OpenIDProvider(openid.issuer, AUDIENCE)
    async with serving(None, openid=provider, web_sign_in=WebSignIn(provider, "web", "openid email api")) as api:
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser, \
                httpx.AsyncClient(follow_redirects=False, timeout=30) as someone:
            began = await browser.get(f"{api.base}/auth/sign-in")
            assert began.status_code == 303, began.text
            back = await through_login(browser, began, "bob", f"{api.base}/auth/callback")
            stranger = await someone.get(back)
            assert stranger.status_code == 400 and "was not started here" in stranger.text
            someone.cookies.set(LOGIN_COOKIE, "another-state", path="/auth")
            assert (await someone.get(back)).status_code == 400
            signed_in = await browser.get(back)
            assert signed_in.status_code == 303, signed_in.text
            who = await browser.get(f"{api.base}/auth/session", headers={"Sec-Fetch-Site": "same-origin"})
    assert who.json()["person"] == BOB


async def test_a_key_the_provider_stops_publishing_stops_signing_as_soon_as_its_key_set_says(signing_key: str) -> None:
    """The provider serves its key set with `Cache-Control: max-age=1`, then retires the key bob's
    token was signed with: the API fetches the set again when it goes stale and refuses the token."""
    with running_provider(jwks_max_age=1) as openid:
        async with serving(None, openid=provider_of(openid)) as api:
            old = await openid.token_for("bob")
            async with with_token(api, old) as bob:
                assert (await bob.get("/me")).json()["person"] == BOB
                await openid.rotate()
                assert parts(old)[0]["kid"] in await openid.retire()
                refused = await eventually(lambda: bob.get("/me"), lambda answer: answer.status_code != 200, timeout=20)
            assert "a key the provider does not publish" in refused.json()["detail"], refused.text
            async with with_token(api, await openid.token_for("bob")) as bob:  # the key in use signs on
                assert (await bob.get("/me")).json()["person"] == BOB


async def test_the_web_sign_in_never_signs_in_a_person_of_the_token_file(signing_key: str, openid: OpenID) -> None:
    """The browser's way in keeps the two kinds of people apart too: with people named by the
    provider's own names, a login whose name the token file holds signs nobody in."""
    await openid.add_account("erin", email="erin@example.com", email_verified=True, preferred_username="ops")
    provider = OpenIDProvider(openid.issuer, AUDIENCE, person_claim="preferred_username")
    tokens = TokenBook({token_of("ops"): "ops"}, "test tokens")
    async with serving(None, openid=provider, web_sign_in=WebSignIn(provider, "web", "openid email profile api"),
                       tokens=tokens) as api:
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            began = await browser.get(f"{api.base}/auth/sign-in")
            back = await through_login(browser, began, "erin", f"{api.base}/auth/callback")
            refused = await browser.get(back)
    assert refused.status_code == 401, refused.text
    assert "its preferred_username 'ops' is a person of the token file (HITL_API_TOKENS)" in refused.text
