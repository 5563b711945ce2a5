"""The scripted model's reading of a script and of where a conversation is in it
(activities/scripted_model.py); sessions playing it are tests/integration/test_building_on_it.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from activities.model import backend_from_env
from activities.scripted_model import END_OF_SCRIPT, ScriptError, ScriptedModel, parse_script
from hitl.settings import Settings
from tests.support.stack import ROOT, nobody_listens, run_product
from workflows.conversation import ChatMessage, Conversation, ModelReply
from workflows.requests import ModelRequest

SCRIPT = [
    {"call": "refund_payment", "args": {"order_id": "A-17", "amount": 250}},
    {"say": "Refunded."},
    {"calls": [{"call": "search_web", "args": {"query": "a"}}, {"call": "search_web", "args": "not json"}], "say": "two"},
]


def request_of(conversation: Conversation) -> ModelRequest:
    return ModelRequest(messages=conversation.messages, tools=[])


async def play(model: ScriptedModel, conversation: Conversation) -> ModelReply:
    reply = await model.complete(request_of(conversation))
    conversation.add_assistant(reply)
    for call in reply.tool_calls:
        conversation.add_tool_result(call.id, "done")
    return reply


async def test_a_conversation_is_played_the_script_in_order_and_then_told_the_end() -> None:
    model = ScriptedModel(parse_script(SCRIPT))
    conversation = Conversation()
    conversation.add_user("refund order A-17")
    first = await play(model, conversation)
    assert [(c.id, c.name, json.loads(c.function.arguments)) for c in first.tool_calls] == [
        ("call_1", "refund_payment", {"order_id": "A-17", "amount": 250})]
    assert (await play(model, conversation)).content == "Refunded."
    conversation.add_user("and search")
    third = await play(model, conversation)
    assert third.content == "two"
    assert [(c.id, c.function.arguments) for c in third.tool_calls] == [
        ("call_3_1", '{"query": "a"}'), ("call_3_2", "not json")]  # sent as written
    assert (await play(model, conversation)).content == END_OF_SCRIPT
    assert (await play(model, conversation)).content == END_OF_SCRIPT


async def test_the_position_survives_older_messages_left_out_of_the_request() -> None:
    """The newest numbered call anchors the count: a request whose start was left out counts on from it."""
    model = ScriptedModel(parse_script([{"say": "one"}, {"call": "t", "args": {}}, {"say": "three"}, {"say": "four"}]))
    conversation = Conversation()
    conversation.add_user("go")
    for _ in range(3):
        await play(model, conversation)
    shortened = [ChatMessage(role="user", content="[5 earlier messages ...]"), *conversation.messages[2:]]
    assert [m.role for m in shortened] == ["user", "assistant", "tool", "assistant"]
    assert (await model.complete(ModelRequest(messages=shortened, tools=[]))).content == "four"


@pytest.mark.parametrize(("script", "says"), [
    ({"say": "x"}, "must be a JSON list of replies"),
    ([{"say": "x"}, "hello"], "reply 2 is a JSON str, not an object"),
    ([{"call": "t", "args": {}, "say": "x"}], "reply 1 has keys ['args', 'call', 'say']"),
    ([{"calls": []}], "reply 1: \"calls\" must be a non-empty list"),
    ([{"calls": [{"tool": "t"}]}], "reply 1, call 1 is not a call"),
    ([{"say": 3}], "reply 1: \"say\" must be text"),
    ([{"speak": "x"}], "reply 1 has keys ['speak']"),
])
def test_a_malformed_script_is_refused_with_where_and_why(script: object, says: str) -> None:
    with pytest.raises(ScriptError, match=None) as refused:
        parse_script(script)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_hitl_model_scripted_picks_the_script_even_with_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    monkeypatch.setenv("HITL_MODEL", f"scripted:{script}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")
    backend = backend_from_env(Settings.from_env())
    assert isinstance(backend, ScriptedModel) and len(backend.replies) == 3
    assert backend.description.startswith(f"a scripted model: 3 replies from {script}")


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read the model script"),
    ("[{\"say\": \"x\"},", "is not JSON"),
    ("[{\"cal\": \"t\"}]", "reply 1 has keys ['cal']"),
])
async def test_the_worker_refuses_a_bad_script_at_start_in_one_line(tmp_path: Path, content: str | None, says: str) -> None:
    script = tmp_path / "script.json"
    if content is not None:
        script.write_text(content)
    # Refused before it connects: the address is one nobody serves, and it is never tried.
    ran = await run_product("worker.py", HITL_MODEL=f"scripted:{script}", HITL_WORKSPACE=str(tmp_path / "ws"),
                            HITL_CONNECT_PATIENCE_SECONDS="0")
    assert ran.returncode == 1, ran
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("worker: ") and says in lines[0], ran.stderr
    assert str(script) in lines[0]


async def test_the_worker_refuses_a_script_calling_a_tool_it_does_not_offer_in_one_line(tmp_path: Path) -> None:
    """The docs' script without the module of its tool: the worker said nothing, and each session was
    told there is no such tool and then played the script's next reply as if the refund had run."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT + [{"call": "transfer_money", "args": {}}]))
    ran = await run_product("worker.py", HITL_MODEL=f"scripted:{script}", HITL_WORKSPACE=str(tmp_path / "ws"),
                            TEMPORAL_ADDRESS=nobody_listens(), HITL_CONNECT_PATIENCE_SECONDS="0")
    assert ran.returncode == 1, ran
    [line] = ran.stderr.strip().splitlines()
    assert line.startswith(f"worker: the model script {script} calls tools this worker does not offer: "
                           "'refund_payment', 'transfer_money' (it offers: ask_user_question, book_flight, "), line
    assert "HITL_TOOL_MODULES" in line, line


async def test_a_script_calling_a_tool_of_a_module_the_worker_loads_is_played(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(
        "from hitl import tool\n\n\n@tool\ndef refund_payment(order_id: str, amount: float) -> str:\n"
        "    \"\"\"Refund.\"\"\"\n    return 'ok'\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT + [{"call": "mcp__files__read", "args": {}}]))
    ran = await run_product("worker.py", HITL_MODEL=f"scripted:{script}", HITL_WORKSPACE=str(tmp_path / "ws"),
                            HITL_TOOL_MODULES="my_tools", PYTHONPATH=f"{ROOT}:{tmp_path}",
                            TEMPORAL_ADDRESS=nobody_listens(), HITL_CONNECT_PATIENCE_SECONDS="0")
    assert ran.returncode == 1 and "cannot reach Temporal" in ran.stderr, ran.stderr  # past every check at start
    assert "does not offer" not in ran.stderr, ran.stderr
