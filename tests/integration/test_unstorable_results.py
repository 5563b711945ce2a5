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

import math
import os
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.openai_backend import OpenAIBackend
from activities.run_tool import ToolActivities
from activities.tools import ToolError
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.session_health import activity_attempts, assert_no_failed_workflow_task
from tests.support.sessions import SECRET_KEY, Agent, running_agent, settled
from workflows.contract import RUN_TOOL
from workflows.limits import is_well_formed, well_formed
from workflows.requests import ToolInvocation

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


# ------------------------------------------------------------------ any result, any failure

class ScriptedTools(ToolActivities):
    """run_tool returns, or raises, whatever the test put under the call's query."""

    outcomes: dict[str, Any] = {}

    @activity.defn(name=RUN_TOOL.name)
    async def run_tool(self, invocation: ToolInvocation) -> Any:
        outcome = self.outcomes[invocation.args["query"]]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


ill_formed_text = st.tuples(st.text(max_size=20), st.characters(categories=["Cs"]), st.text(max_size=20)).map("".join)
unstorable = st.one_of(
    ill_formed_text,
    st.lists(ill_formed_text, min_size=1, max_size=3),
    st.dictionaries(ill_formed_text, st.text(max_size=5), min_size=1, max_size=2),
    st.sampled_from([object(), {1, 2}, b"\xff\xfe", math.nan, math.inf, 10**400, None]),
)
outcomes = st.one_of(
    unstorable,
    ill_formed_text.map(ToolError),  # a failure whose text cannot be stored
    ill_formed_text.map(lambda message: ApplicationError(message, type="ToolError", non_retryable=True)),
)


@pytest.fixture
async def scripted_agent(env: WorkflowEnvironment, workspace: Path) -> AsyncIterator[tuple[Agent, FakeOpenAI]]:
    with FakeOpenAI() as fake:
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async for running in running_agent(env.client, workspace, backend, tools=ScriptedTools(workspace)):
            yield running, fake


@settings(max_examples=int(os.environ.get("HITL_PROPERTY_EXAMPLES", "25")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(outcome=outcomes, content=ill_formed_text)
async def test_every_unstorable_outcome_ends_as_an_answer_or_an_error_never_a_retry(
        scripted_agent: tuple[Agent, FakeOpenAI], outcome: Any, content: str) -> None:
    agent, fake = scripted_agent
    key = uuid.uuid4().hex
    ScriptedTools.outcomes[key] = outcome
    fake.replies.clear()  # what an earlier example's session left unread
    fake.script(tool_calls(("c", "search_web", {"query": key})), text(content))
    session = await agent.start("search")

    status = await settled(session)
    assert status["error"] is None and status["last_answer"] == well_formed(content), status
    [result] = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert is_well_formed(result) and result.startswith("Error: search_web failed: "), result
    assert await activity_attempts(session, "run_tool") == [1]
    assert await activity_attempts(session, "call_model") == [1, 1]
    await assert_no_failed_workflow_task(session)
