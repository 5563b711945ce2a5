"""An Update of any size never fails a workflow task, however the server delivers it.

The worker's answer to an Update carries the whole request back (sdk-core's Rejection has
`rejected_request`, its Acceptance `accepted_request`), and the server fails the task and
terminates the run when that answer is over its blob limit (2 MiB). Whether a refused 2.1 MB
Update did so depended on load: delivered alone, in a speculative task, the server dropped the
task and the caller got an error; delivered with other work in a normal task (a signal, an
activity's result, as on a busy machine) it ended the session. Here the Update is always
delivered with other work: the worker is stopped while a signal waits, so the task that
carries the Update is a normal one, every time.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.devserver import MAX_UPDATE_REQUEST_BYTES
from tests.support.sessions import Agent, eventually, pending_items, query, without_rpc_retries
from tests.support.session_health import assert_healthy, can_still_decide
from hitl.worker import build_worker

DELETE = "please delete notes.txt"


async def deliver_beside_a_signal(env: WorkflowEnvironment, workspace: Path, name: str, payload: Any,
                                  *, retried: bool = True) -> tuple[Any, BaseException | None]:
    """Send the Update while no worker polls and a signal waits, so both arrive in one normal
    workflow task once a worker is back. Returns the session and what the Update raised.
    `retried=False` sends it without the SDK's retries, for a refusal as it arrives."""
    task_queue = f"hitl-update-size-{uuid.uuid4().hex[:8]}"
    agent = Agent(env.client, task_queue, workspace)
    async with build_worker(env.client, task_queue, OfflineModel(), workspace):
        session = await agent.start(DELETE)
        await pending_items(session)
    await session.signal("approve", {"call_id": "no-such-call"})  # refused and audited: a task nobody takes yet
    sender = session if retried else (await without_rpc_retries(env.client)).get_workflow_handle(session.id)
    update = asyncio.ensure_future(sender.execute_update(name, payload))
    await asyncio.sleep(0.5)  # the Update reaches the server before the worker returns (or is refused first)
    async with build_worker(env.client, task_queue, OfflineModel(), workspace):
        outcome: BaseException | None = None
        try:
            await asyncio.wait_for(update, 60)
        except (RPCError, WorkflowUpdateFailedError) as error:
            outcome = error
        # The worker may only just poll (the refusal came at once): ask until it has answered.
        status = await eventually(lambda: query(session, "status"), lambda s: bool(s["ignored_signals"]))
        assert status["ignored_signals"], "the signal beside the Update was never handled"
        await assert_healthy(session)
        await can_still_decide(session, workspace)
        assert (await session.describe()).status == WorkflowExecutionStatus.RUNNING
    return session, outcome


@pytest.mark.parametrize("verb, payload", [
    ("approve", "x" * 2_100_000),
    ("user_message", {"text": "x" * 2_100_000}),
], ids=["a 2.1 MB bare string on approve", "a 2.1 MB text on user_message"])
async def test_an_update_over_the_limit_is_refused_as_it_arrives(env: WorkflowEnvironment, workspace: Path,
                                                                 verb: str, payload: Any) -> None:
    _, outcome = await deliver_beside_a_signal(env, workspace, f"{verb}_update", payload, retried=False)
    assert isinstance(outcome, RPCError) and "in-flight updates" in outcome.message, outcome


async def test_an_update_just_under_the_limit_is_refused_by_the_validator_and_its_answer_fits(
        env: WorkflowEnvironment, workspace: Path) -> None:
    """The worst case for the refusal's own size: the largest request the server admits, echoed
    back with the validator's failure. The failure (message, details, stack) must fit in what is
    left below 2 MiB, whatever the request held."""
    payload = "x" * (MAX_UPDATE_REQUEST_BYTES - 5_000)
    _, outcome = await deliver_beside_a_signal(env, workspace, "approve_update", payload)
    assert isinstance(outcome, WorkflowUpdateFailedError), outcome
    assert len(outcome.cause.message) <= 2_000
