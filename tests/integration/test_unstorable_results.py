"""An activity's outcome that history cannot store is an answer or an error, never a retry for ever.

An OpenAI-compatible endpoint may send valid JSON whose strings hold a lone surrogate
(`"\\ud800"`); a file name that is not UTF-8 comes back from the OS with one. Before the fix
the activity returned such text, the SDK could not convert it (`UnicodeEncodeError ...
surrogates not allowed`), and the attempt failed after the activity's own attempt count:
Temporal retried it without limit, every attempt a paid model call, the session `running`
with no error. Now a model reply's and a tool's text is made well-formed (U+FFFD), and whatever
result still cannot be stored, from any activity the worker runs, fails for good with the reason
(activities/storable_outcomes.py).
"""

from __future__ import annotations

import os

from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.session_health import activity_attempts, assert_no_failed_workflow_task
from tests.support.sessions import Agent, settled

LONE = "\ud800"  # half of a UTF-16 pair, alone


async def test_a_model_reply_with_lone_surrogates_is_an_odd_reply_the_model_reads_back(
        openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    fake.script(
        tool_calls(
            (f"call{LONE}", f"search_web{LONE}", {"query": "milk"}),  # in a call id and a tool name
            ("raw", "search_web", f'{{"query": "{LONE} milk"}}'),  # in the arguments' text
            ("escaped", "search_web", {"query": "milk \udfff"}),  # escaped in the arguments' JSON
        ),
        text(f"found the milk {LONE}"),  # in the content
    )
    session = await agent.start("search for milk")

    status = await settled(session)
    assert status["error"] is None and status["last_answer"] == "found the milk \ufffd", status
    results = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert "there is no tool named 'search_web\ufffd'" in results[0], results
    assert all("remember the milk" in result for result in results[1:]), results
    assert all(attempt == 1 for attempt in await activity_attempts(session, "call_model"))
    await assert_no_failed_workflow_task(session)


async def test_a_search_that_meets_a_file_name_not_in_utf8_answers(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    (agent.workspace / os.fsdecode(b"milk-\xff.txt")).write_text("more milk\n")
    fake.script(tool_calls(("s", "search_web", {"query": "milk"})), text("done"))
    session = await agent.start("search for milk")

    status = await settled(session)
    assert status["last_answer"] == "done", status
    [result] = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert "milk-\ufffd.txt" in result and "remember the milk" in result, result
    assert await activity_attempts(session, "run_tool") == [1]
    await assert_no_failed_workflow_task(session)
