"""The OpenAI-compatible path: real `openai` client, real HTTP, scripted loopback server."""

from __future__ import annotations

import json

from tests.support.sessions import SECRET_KEY, Agent, assert_well_formed, eventually, pending_items, settled
from tests.support.fake_openai import FakeOpenAI, error, text, tool_calls


async def test_tool_call_approved_then_answer(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(tool_calls(("call_abc", "delete_file", {"path": "notes.txt"})), text("I deleted notes.txt."))
    session = await agent.start("delete notes.txt please", model="my-model")

    [item] = await pending_items(session)
    assert (item["call_id"], item["tool"], item["args"]) == ("call_abc", "delete_file", {"path": "notes.txt"})
    await session.signal("approve", {"by": "ana"})

    status = await settled(session)
    assert status["last_answer"] == "I deleted notes.txt."
    assert not (agent.workspace / "notes.txt").exists()
    first, second = fake.requests
    assert first["model"] == "my-model"
    assert {tool["function"]["name"] for tool in first["tools"]} >= {"delete_file", "ask_user_question"}
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_abc", "content": "Deleted notes.txt."}
    for request in fake.requests:
        assert_well_formed(request["messages"][1:])
    assert fake.headers[0]["authorization"] == f"Bearer {SECRET_KEY}"


async def test_the_key_never_enters_history(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(text("hello"))
    session = await agent.start("hi")
    await settled(session)
    history = await session.fetch_history()
    assert SECRET_KEY not in json.dumps(history.to_json_dict())


async def test_429_is_retried_after_retry_after_then_succeeds(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(error(429, "slow down", **{"Retry-After": "0"}), error(503, "overloaded"), text("made it"))
    session = await agent.start("hi")

    status = await settled(session)
    assert status["last_answer"] == "made it"
    assert status["error"] is None
    assert len(fake.requests) == 3


async def test_401_fails_the_turn_at_once_but_keeps_the_session(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(error(401, "Incorrect API key provided"))
    session = await agent.start("hi")

    status = await settled(session)
    assert status["state"] == "idle"
    assert "401" in status["error"] and "Incorrect API key provided" in status["error"]
    assert len(fake.requests) == 1, "a 401 is not retried"

    fake.script(text("now it works"))
    await session.signal("user_message", {"text": "try again"})
    status = await settled(session)
    assert status["last_answer"] == "now it works" and status["error"] is None
    assert [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "user"] == ["hi", "try again"]


async def test_broken_arguments_and_unknown_tools_become_tool_errors(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(
        tool_calls(
            ("c1", "delete_file", '{"path": "notes.txt"'),
            ("c2", "launch_rockets", {"count": 3}),
            ("c3", "delete_file", {"file": "notes.txt"}),
            ("c4", "search_web", ["not", "an", "object"]),
        ),
        text("sorry"),
    )
    session = await agent.start("do things")

    status = await settled(session)
    assert status["last_answer"] == "sorry"
    results = {m["tool_call_id"]: m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"}
    assert "not valid JSON" in results["c1"]
    assert "no tool named 'launch_rockets'" in results["c2"] and "delete_file" in results["c2"]
    assert "do not fit delete_file" in results["c3"] and "path" in results["c3"]
    assert "must be a JSON object" in results["c4"]
    assert (agent.workspace / "notes.txt").exists()
    assert_well_formed(await session.query("transcript"))


async def test_repeated_call_ids_from_a_model_are_made_unique(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(
        tool_calls(("call_0", "search_web", {"query": "milk"})),
        tool_calls(("call_0", "search_web", {"query": "milk"})),
        text("done"),
    )
    session = await agent.start("search twice")
    await settled(session)
    transcript = await session.query("transcript")
    ids = [call["id"] for m in transcript for call in m.get("tool_calls") or []]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert_well_formed(transcript)


async def test_retry_after_sets_the_next_attempt(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(error(429, "rate limited", **{"Retry-After": "120"}))
    session = await agent.start("hi")

    async def model_activity():
        description = await session.describe()
        return list(description.raw_description.pending_activities)

    [activity] = await eventually(model_activity, lambda acts: bool(acts) and acts[0].attempt == 2)
    wait = activity.next_attempt_schedule_time.ToDatetime() - activity.last_attempt_complete_time.ToDatetime()
    assert 115 <= wait.total_seconds() <= 125, wait
    assert "rate limited" in activity.last_failure.message
    await session.signal("cancel", {"reason": "test over"})
    assert (await session.result()).reason == "cancelled: test over"
