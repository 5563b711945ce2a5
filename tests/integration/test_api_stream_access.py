"""An open event stream is no wider than a read: someone who may read a session only while a call
waits for them stops receiving its events once it is settled, by bearer token or by ticket, and
a token taken out of the tokens file ends the streams it opened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.api.stream_access import TOKEN_WITHDRAWN
from tests.support.api_server import PEOPLE, Api, EventStream, api, of_type, serving, signing_key, write_tokens  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent

PRIVATE = "my private note: the safe's code is 4711"


def ended_or_leaked(seen: list[dict[str, Any]]) -> bool:
    return bool(of_type(seen, "end")) or "4711" in json.dumps(seen)


async def bob_moves_on_and_says_something_private(api: Api, session: str) -> None:
    """Bob's next message settles the waiting call (he moved on); once that turn is over, a private one."""
    async with api.as_("bob") as bob:
        moved_on = await bob.post(f"/sessions/{session}/messages", json={"text": "never mind, keep the file"})
        assert moved_on.status_code == 200, moved_on.text
        await eventually(lambda: bob.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        async with api.as_("ana") as ana:  # ana's part in the session is over
            assert (await ana.get(f"/sessions/{session}")).status_code == 404
        private = await bob.post(f"/sessions/{session}/messages", json={"text": PRIVATE})
        assert private.status_code == 200, private.text
        await eventually(lambda: bob.get(f"/sessions/{session}/transcript"),
                         lambda answer: PRIVATE in answer.text and answer.json()[-1]["role"] == "assistant")


def assert_ended_for_lack_of_access(seen: list[dict[str, Any]]) -> None:
    assert "4711" not in json.dumps(seen), seen
    [end] = of_type(seen, "end")
    assert end is seen[-1] and end["data"]["access_ended"] is True
    assert end["data"]["problem"] == "you may no longer read this session"  # why, and nothing of the session


async def test_an_approvers_stream_ends_when_the_call_is_settled_and_never_carries_what_follows(api: Api) -> None:
    started = await api.start("bob", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    session = started["session_id"]
    async with api.as_("ana") as ana:
        async with ana.stream("GET", f"/sessions/{session}/events") as response:
            assert response.status_code == 200
            stream = EventStream(response)
            await stream.read_until(lambda seen: bool(of_type(seen, "pause_opened")))

            await bob_moves_on_and_says_something_private(api, session)

            assert_ended_for_lack_of_access(await stream.read_until(ended_or_leaked))
            assert [event async for event in stream.events] == []  # and nothing after the end
    assert (api.agent.workspace / "notes.txt").exists()


async def test_a_ticket_stream_ends_the_same_way_when_its_reader_decided_the_call(api: Api) -> None:
    started = await api.start("bob", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("ana") as ana:
        ticket = (await ana.post(f"/sessions/{session}/events/ticket")).json()
    async with api.as_(None) as page:  # an EventSource: no headers, the ticket in the URL
        async with page.stream("GET", ticket["url"]) as response:
            assert response.status_code == 200
            stream = EventStream(response)
            await stream.read_until(lambda seen: bool(of_type(seen, "pause_opened")))
            async with api.as_("ana") as ana:
                rejected = await ana.post(f"/sessions/{session}/calls/{call}/reject", json={"reason": "not today"})
                assert rejected.status_code == 200, rejected.text

            await bob_moves_on_and_says_something_private(api, session)

            assert_ended_for_lack_of_access(await stream.read_until(ended_or_leaked))
    assert (api.agent.workspace / "notes.txt").exists()


async def test_the_owners_stream_goes_on_through_the_same_story(api: Api) -> None:
    started = await api.start("bob", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    session = started["session_id"]
    async with api.as_("bob") as bob:
        async with bob.stream("GET", f"/sessions/{session}/events") as response:
            stream = EventStream(response)
            await stream.read_until(lambda seen: bool(of_type(seen, "pause_opened")))
            await bob_moves_on_and_says_something_private(api, session)
            seen = await stream.read_until(lambda seen: PRIVATE in json.dumps(seen))
    assert not of_type(seen, "end")


async def test_a_token_taken_out_of_the_tokens_file_ends_its_streams_at_the_next_event(
        env: WorkflowEnvironment, workspace: Path, signing_key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = write_tokens(tmp_path / "tokens.json")
    monkeypatch.setenv("HITL_API_TOKENS", str(tokens))
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, tokens=None) as api:
            session = (await api.start("ana", "hello there", participants=["bob"]))["session_id"]
            async with api.as_("ana") as ana, api.as_(None) as page:
                ticket = (await ana.post(f"/sessions/{session}/events/ticket")).json()
                async with ana.stream("GET", f"/sessions/{session}/events") as by_token, \
                        page.stream("GET", ticket["url"]) as by_ticket:
                    streams = [EventStream(by_token), EventStream(by_ticket)]
                    for stream in streams:
                        await stream.read_until(lambda seen: bool(of_type(seen, "answer")))

                    write_tokens(tokens, tuple(person for person in PEOPLE if person != "ana"))
                    assert (await ana.get(f"/sessions/{session}")).status_code == 401
                    async with api.as_("bob") as bob:
                        sent = await bob.post(f"/sessions/{session}/messages", json={"text": PRIVATE})
                        assert sent.status_code == 200, sent.text

                    for stream in streams:
                        seen = await stream.read_until(ended_or_leaked)
                        assert "4711" not in json.dumps(seen), seen
                        assert seen[-1]["data"] == {"problem": TOKEN_WITHDRAWN, "access_ended": True}
