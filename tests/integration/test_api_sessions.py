"""The HTTP API through real HTTP requests: start, read, decide, and every refusal's status code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hitl.devserver import free_port
from tests.support.api_server import Api, api, scripted_api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually
from tests.support.fake_openai import FakeOpenAI, text, tool_calls

FORM = [{"name": "origin", "type": "string"}, {"name": "class", "type": "enum", "choices": ["economy", "business"]}]


async def test_start_answers_201_with_the_first_pause_and_the_reads_follow(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    assert started["status"]["state"] == "awaiting_human"
    [item] = started["pending"]
    assert (item["kind"], item["tool"], item["args"]) == ("approval", "delete_file", {"path": "notes.txt"})
    assert item["requested_by"] == "ana"
    session = started["session_id"]
    async with api.as_("ana") as http:
        assert (await http.get(f"/sessions/{session}")).json()["state"] == "awaiting_human"
        assert [p["call_id"] for p in (await http.get(f"/sessions/{session}/pending")).json()] == [item["call_id"]]
        transcript = (await http.get(f"/sessions/{session}/transcript")).json()
        assert (transcript[0]["role"], transcript[0]["content"]) == ("user", "please delete notes.txt")
        audit = (await http.get(f"/sessions/{session}/audit")).json()
        assert [event["event"] for event in audit] == ["requested"]


async def test_a_session_that_answers_at_once_is_answered_in_the_201(api: Api) -> None:
    started = await api.start("ana", "hello there")
    assert started["status"]["state"] == "idle"
    assert started["pending"] == []
    assert started["status"]["last_answer"]


async def test_approve_with_edited_args_runs_with_them_and_by_in_the_body_is_ignored(api: Api) -> None:
    (api.agent.workspace / "old.txt").write_text("old\n")
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("bob") as bob, api.as_("ana") as http:
        decided = await bob.post(f"/sessions/{session}/calls/{call}/approve",
                                 json={"args": {"path": "old.txt"}, "comment": "the old one", "by": "mallory"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["outcome"] == "edited"
        await eventually(lambda: http.get(f"/sessions/{session}"), lambda r: r.json()["state"] == "idle")
        audit = (await http.get(f"/sessions/{session}/audit")).json()
    assert not (api.agent.workspace / "old.txt").exists()
    assert (api.agent.workspace / "notes.txt").exists()
    [decision] = [event for event in audit if event["event"] == "edited"]
    assert decision["by"] == "bob"  # the token's person, not the body's "mallory"
    assert all(event.get("by") != "mallory" for event in audit)


async def test_messages_start_a_new_turn_and_cancel_closes(api: Api) -> None:
    started = await api.start("ana", "hello there")
    session = started["session_id"]
    async with api.as_("ana") as http:
        sent = await http.post(f"/sessions/{session}/messages", json={"text": "please delete notes.txt", "wait": True})
        assert sent.status_code == 200, sent.text
        assert sent.json()["accepted"] is True
        assert [item["tool"] for item in sent.json()["pending"]] == ["delete_file"]
        cancelled = await http.post(f"/sessions/{session}/cancel", json={"reason": "changed my mind"})
        assert cancelled.status_code == 200, cancelled.text
        status = await eventually(lambda: http.get(f"/sessions/{session}"), lambda r: r.json()["state"] == "closed")
    assert "changed my mind (by ana)" in status.json()["closed_reason"]
    assert (api.agent.workspace / "notes.txt").exists()


async def test_401_without_a_token_or_with_an_unknown_one(api: Api) -> None:
    for http in (api.as_(None), api.as_(None, headers={"Authorization": "Bearer not-a-token-of-anyone"}),
                 api.as_(None, headers={"Authorization": "Basic YW5hOmFuYQ=="})):
        async with http:
            for method, path in (("GET", "/inbox"), ("POST", "/sessions"), ("GET", "/sessions/x/pending"),
                                 ("POST", "/sessions/x/calls/c/approve"), ("GET", "/sessions/x/events")):
                answer = await http.request(method, path, json={} if method == "POST" else None)
                assert answer.status_code == 401, (method, path, answer.text)
                assert answer.json()["detail"]


async def test_403_for_someone_who_is_not_an_approver_and_under_four_eyes(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob", "ana"]}, four_eyes=True)
    session, call = started["session_id"], started["pending"][0]["call_id"]
    only_bob = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]})
    async with api.as_("carol") as carol, api.as_("ana") as ana:
        unseen = await carol.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert unseen.status_code == 404, unseen.text  # carol has no part in ana's session: it does not exist for her
        own = await ana.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert own.status_code == 403, own.text
        assert "four-eyes" in own.json()["detail"]
        not_hers = await ana.post(f"/sessions/{only_bob['session_id']}/calls/{only_bob['pending'][0]['call_id']}/approve",
                                  json={})
        assert not_hers.status_code == 403, not_hers.text
        assert "ana may not decide delete_file; approvers: bob" in not_hers.json()["detail"]
    assert (api.agent.workspace / "notes.txt").exists()


async def test_404_for_an_unknown_session_or_call(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    session = started["session_id"]
    async with api.as_("ana") as http:
        for method, path in (("GET", "/sessions/no-such-session"), ("GET", "/sessions/no-such-session/pending"),
                             ("GET", "/sessions/no-such-session/transcript"),
                             ("POST", "/sessions/no-such-session/calls/c1/approve"),
                             ("POST", "/sessions/no-such-session/messages"), ("POST", "/sessions/no-such-session/cancel"),
                             ("POST", f"/sessions/{session}/calls/no-such-call/approve"),
                             ("POST", f"/sessions/{session}/calls/no-such-call/reject")):
            body = {"text": "hello"} if path.endswith("/messages") else {}
            answer = await http.request(method, path, json=body if method == "POST" else None)
            assert answer.status_code == 404, (path, answer.text)


async def test_409_when_already_settled_stale_or_taken(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    session, item = started["session_id"], started["pending"][0]
    url = f"/sessions/{session}/calls/{item['call_id']}"
    async with api.as_("ana") as bob:
        stale = await bob.post(f"{url}/approve", json={"expected_args_sha256": "0" * 64})
        assert stale.status_code == 409, stale.text
        assert "stale" in stale.json()["detail"]
        ok = await bob.post(f"{url}/reject", json={"reason": "keep it", "expected_args_sha256": item["args_sha256"]})
        assert ok.status_code == 200, ok.text
        again = await bob.post(f"{url}/approve", json={})
        assert again.status_code == 409, again.text
        assert "already settled" in again.json()["detail"]
        taken = await bob.post("/sessions", json={"message": "hello", "session_id": session})
        assert taken.status_code == 409, taken.text


async def test_422_for_an_invalid_body_or_arguments(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    url = f"/sessions/{session}/calls/{call}"
    async with api.as_("ana") as http:
        for body in ({"args": "notes.txt"}, {"unknown": 1}, {"args": {"path": "x", "force": True}}, {"args": {}}):
            answer = await http.post(f"{url}/approve", json=body)
            assert answer.status_code == 422, (body, answer.text)
            assert answer.json()["detail"]
        not_json = await http.post(f"{url}/approve", content=b"{nope", headers={"Content-Type": "application/json"})
        assert not_json.status_code == 422
        question_verb = await http.post(f"{url}/answer", json={"answer": "yes"})
        assert question_verb.status_code == 422, question_verb.text
        for bad_start in ({}, {"message": "hi", "max_steps": 0}, {"message": "hi", "approvers": {"delete_file": []}},
                          {"message": "hi", "session_id": "has spaces"}):
            answer = await http.post("/sessions", json=bad_start)
            assert answer.status_code == 422, (bad_start, answer.text)
        # Refused by the worker as the session starts (its catalog knows the tools): the reason still comes back.
        unknown_tool = await http.post("/sessions", json={"message": "hi", "approvers": {"delete_fiel": ["bob"]}})
        assert unknown_tool.status_code == 422, unknown_tool.text
        assert "no tool named 'delete_fiel'" in unknown_tool.json()["detail"]
        assert (await http.get(f"/sessions/{session}/pending")).json()[0]["call_id"] == call


def test_a_malformed_tokens_file_stops_the_server_at_start_with_the_reason(tmp_path: Path) -> None:
    for content, reason in (("{not json", "not JSON"), ('["a"]', "must be a JSON object"),
                            ('{"short": "ana"}', "shorter than 16"), ('{"0123456789abcdefgh": 7}', "non-empty string")):
        tokens = tmp_path / "tokens.json"
        tokens.write_text(content)
        completed = subprocess.run(
            [sys.executable, "starter.py", "serve", "--port", str(free_port())], cwd=Path(__file__).resolve().parents[2],
            env={"PATH": "/usr/bin:/bin", "HITL_API_TOKENS": str(tokens)}, capture_output=True, text=True, timeout=60,
        )
        assert completed.returncode != 0
        assert reason in completed.stderr and "HITL_API_TOKENS" in completed.stderr, completed.stderr


async def test_a_question_is_answered_through_the_api_and_a_wrong_answer_is_422(scripted_api: tuple[Api, FakeOpenAI]) -> None:
    api, fake = scripted_api
    fake.script(tool_calls(("q1", "ask_user_question", {"question": "Trip details?", "fields": FORM})), text("thanks"))
    started = await api.start("ana", "book a trip")
    [item] = started["pending"]
    assert (item["kind"], item["question"], item["fields"][1]["choices"]) == ("question", "Trip details?", ["economy", "business"])
    url = f"/sessions/{started['session_id']}/calls/q1/answer"
    async with api.as_("ana") as bob:
        wrong = await bob.post(url, json={"answer": {"origin": "Paris", "class": "first"}})
        assert wrong.status_code == 422, wrong.text
        assert "not one of ['economy', 'business']" in wrong.json()["detail"]
        right = await bob.post(url, json={"answer": {"origin": "Paris", "class": "business"}})
        assert right.status_code == 200, right.text
        status = await eventually(lambda: bob.get(f"/sessions/{started['session_id']}"), lambda r: r.json()["state"] == "idle")
    assert status.json()["last_answer"] == "thanks"


async def test_a_decision_over_temporals_payload_limit_is_422_and_the_call_still_waits(api: Api) -> None:
    """A reason of 2.5 MB is refused by the API's own check of the decision (the workflow's
    bounds), before Temporal sees it: not "the session is closed" (a 409 the caller would give
    up on), and the call still waits for a decision that fits."""
    started = await api.start("ana", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("ana") as http:
        answer = await http.post(f"/sessions/{session}/calls/{call}/reject", json={"reason": "x" * 2_500_000})
        assert answer.status_code == 422, answer.text
        assert "at most 10000 are accepted" in answer.json()["detail"]
        assert (await http.get(f"/sessions/{session}/pending")).json()[0]["call_id"] == call
        rejected = await http.post(f"/sessions/{session}/calls/{call}/reject", json={"reason": "too big, then fine"})
        assert rejected.status_code == 200, rejected.text


async def test_a_cancel_reason_over_temporals_payload_limit_is_422_and_the_session_still_runs(api: Api) -> None:
    """A cancel's reason is checked against the session's bound before it is sent: Temporal would
    refuse a 3 MB Update outright, which the API could only answer as 503."""
    started = await api.start("ana", "please delete notes.txt")
    session = started["session_id"]
    async with api.as_("ana") as http:
        answer = await http.post(f"/sessions/{session}/cancel", json={"reason": "x" * 3_000_000})
        assert answer.status_code == 422, answer.text
        assert "at most 10000 are accepted" in answer.json()["detail"]
        assert (await http.get(f"/sessions/{session}")).json()["state"] == "awaiting_human"
        cancelled = await http.post(f"/sessions/{session}/cancel", json={"reason": "too long, then fine"})
        assert cancelled.status_code == 200, cancelled.text


async def test_a_session_started_through_the_api_has_a_summary_and_details_in_the_temporal_ui(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    described = await api.agent.client.get_workflow_handle(started["session_id"]).describe()
    assert await described.static_summary() == "Agent session by ana: please delete notes.txt"
    details = await described.static_details()
    assert f"`{started['session_id']}`, started with `the HTTP API` by ana" in (details or "")
