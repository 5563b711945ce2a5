"""A test that waits on a session no worker moves fails with the reason, not at pytest's timeout."""

from __future__ import annotations

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support import bounded_waits
from tests.support.sessions import Agent, fast_forward


@pytest.fixture
def unserved(env: WorkflowEnvironment, workspace: object, monkeypatch: pytest.MonkeyPatch) -> Agent:
    """Sessions on a task queue nobody polls, and the tests' bound cut to seconds."""
    monkeypatch.setattr(bounded_waits, "WAIT_SECONDS", 3)
    return Agent(env.client, f"nobody-polls-{uuid.uuid4().hex[:8]}", workspace)  # type: ignore[arg-type]


async def test_waiting_for_a_result_no_worker_brings_fails_with_what_holds_it(unserved: Agent) -> None:
    session = await unserved.start("hello")
    with pytest.raises(AssertionError, match=r"its close \(handle.result\(\)\) did not come within 3 s; "
                                             r"in flight: a workflow task \(PENDING_WORKFLOW_TASK_STATE_SCHEDULED\)"):
        await session.result()


async def test_an_update_no_worker_takes_fails_with_what_holds_it(unserved: Agent) -> None:
    session = await unserved.start("hello")
    with pytest.raises(AssertionError, match=r"the Update 'answer_update' did not come within 3 s; in flight: a workflow task"):
        await session.execute_update("answer_update", {"answer": "yes", "by": "ana"})


async def test_a_fast_forward_held_by_work_in_flight_fails_with_it(
    skipping_env: WorkflowEnvironment, workspace: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time-skipping server skips only while nothing is in flight: here the first workflow task."""
    from tests.support import sessions
    monkeypatch.setattr(sessions, "FAST_FORWARD_SECONDS", 3)
    session = await Agent(skipping_env.client, f"nobody-polls-{uuid.uuid4().hex[:8]}", workspace).start("hello")  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match=r"a fast-forward of 60 s did not finish within 3 s; "
                                             r"the server holds the clock for a workflow task"):
        await fast_forward(skipping_env, session, 60)
