"""A user tool is a typed function and an approval setting; failures reach the model as errors."""

from __future__ import annotations

from activities.tools import CATALOG
from tests.support import example_tools
from tests.support.sessions import Agent, pending_items, settled
from tests.support.fake_openai import FakeOpenAI, text, tool_calls


def test_the_schema_comes_from_type_hints() -> None:
    schema = CATALOG.get("transfer_money").openai_schema()["function"]
    assert schema["description"] == "Transfer money to someone; transfers over 100 need approval."
    parameters = schema["parameters"]
    assert parameters["required"] == ["to", "amount"]
    assert parameters["properties"]["amount"]["type"] == "number"
    assert parameters["properties"]["currency"]["enum"] == ["EUR", "USD"]
    assert "context" not in CATALOG.get("delete_file").openai_schema()["function"]["parameters"]["properties"]


async def test_an_approval_predicate_decides_per_call(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(
        tool_calls(("small", "transfer_money", {"to": "ana", "amount": 20}),
                   ("large", "transfer_money", {"to": "bo", "amount": 500, "currency": "USD"})),
        text("done"),
    )
    session = await agent.start("pay people")
    [item] = await pending_items(session)
    assert item["call_id"] == "large"
    await session.signal("reject", {"reason": "too much"})

    await settled(session)
    results = {m["tool_call_id"]: m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"}
    assert results["small"] == "Transferred 20.00 EUR to ana."
    assert results["large"].startswith("Rejected by a person") and "too much" in results["large"]


async def test_tool_failures_are_retried_then_reported_to_the_model(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    example_tools.ATTEMPTS.clear()
    fake.script(
        tool_calls(("f", "flaky_lookup", {"key": "answer"}), ("b", "always_broken", {"key": "x"}),
                   ("s", "strict_tool", {"count": -1}), ("t", "strict_tool", {"count": "two"})),
        text("noted"),
    )
    session = await agent.start("look things up")

    status = await settled(session)
    assert status["last_answer"] == "noted"
    results = {m["tool_call_id"]: m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"}
    assert results["f"] == "answer = 42" and example_tools.ATTEMPTS["answer"] == 3
    assert results["b"] == "Error: always_broken failed: division by zero in always_broken"
    assert results["s"] == "Error: strict_tool failed: count must not be negative"
    assert "do not fit strict_tool" in results["t"]
