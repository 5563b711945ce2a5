"""Sessions in tests: an agent (a worker on its own task queue), waits on its queries, the
replay corpus recorder, and the checks every session test shares."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState, PendingWorkflowTaskState, WorkflowTaskFailedCause
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.service import RetryConfig, RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from activities.openai_backend import OpenAIBackend
from hitl.devserver import temporal_binary
from hitl.exit_cleanly import exit_now
from hitl.settings import DATA_CONVERTER
from tests.support.fake_openai import FakeOpenAI
from hitl import worker
from hitl.worker import WorkerTuning, build_worker
from workflows.agent import AgentWorkflow
from workflows.conversation import ModelReply
from workflows.requests import ModelRequest


T = TypeVar("T")


RECORD_HISTORIES_TO = os.environ.get("HITL_RECORD_HISTORIES")


SECRET_KEY = "sk-test-do-not-leak-7f3a"


# The every-task-replays tier (tests/integration/test_every_task_replays.py): with a cache of 0, each
# workflow task of every session replays its whole history, so a session that decides from
# anything a replay can see differently fails a task; the tier's agents check that none did.
REPLAY_TIER_CACHE = os.environ.get("HITL_TEST_WORKFLOW_CACHE_SIZE", "").strip()

# In that tier every query the tests poll with is a whole replay too, and the server buffers
# one query per session while a task is in flight: polling every 50 ms crowds out the model
# activity's own query back into the workflow (activities/model_context.py), which then waits
# seconds per attempt. So the tier polls four times less often and waits three times as long
# before it calls a session stuck; a stuck session still fails, later. The load tier
# (tests/system/test_under_load.py) sets the patience alone: it means to be slow.
POLL_AT_LEAST_SECONDS = 0.2 if REPLAY_TIER_CACHE else 0.0
PATIENCE = float(os.environ.get("HITL_TEST_PATIENCE") or (3.0 if REPLAY_TIER_CACHE else 1.0))


class Agent:
    """A running worker on its own task queue, and a way to start sessions on it."""

    def __init__(self, client: Client, task_queue: str, workspace: Path) -> None:
        self.client = client
        self.task_queue = task_queue
        self.workspace = workspace

    async def start(self, message: str, session_id: str | None = None, **options: Any) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            AgentWorkflow.run,
            {"message": message, **options},
            id=session_id or f"session-{uuid.uuid4().hex[:10]}",
            task_queue=self.task_queue,
        )


async def running_agent(client: Client, workspace: Path, backend: Any = None, tools: Any = None) -> AsyncIterator[Agent]:
    task_queue = f"hitl-test-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, task_queue, backend or OfflineModel(), workspace, tools=tools):
        yield Agent(client, task_queue, workspace)
    await record_if_asked(client, task_queue)
    if REPLAY_TIER_CACHE:
        failed = await failed_workflow_tasks(client, f"TaskQueue = '{task_queue}'")
        assert not failed, "workflow tasks failed:\n" + "\n".join(failed)


OPERATOR_CAUSES = (WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
                   WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND)


async def without_rpc_retries(client: Client) -> Client:
    """A second connection to the same server whose calls are never retried by the SDK. The
    server refuses an oversized Update with RESOURCE_EXHAUSTED, which the SDK retries for about
    ten seconds of backoff plus however long each 2 MB attempt takes on a busy machine; a test
    of that refusal wants the server's first answer, not a guess at how long the retries last.
    (`max_retries=0` is no bound to sdk-core: it still retried for 13 s. One retry allowed
    within one millisecond is none in practice.)"""
    return await Client.connect(
        client.service_client.config.target_host, namespace=client.namespace,
        data_converter=client.data_converter, retry_config=RetryConfig(max_retries=1, max_elapsed_time_millis=1),
    )


# sdk-core at a cache of 0 (this tier's setting, never a deployment's): a query that reaches a run
# whose workflow task is in flight is answered by replaying the history up to that started task,
# and core runs that task's local activity for real to get there (the worker logs a second
# `judge_calls` of the same step, not replaying). The run it built then receives the real task,
# whose marker for that activity finds it already executed, and core fails the task with this
# message; the retried task completes. Caught with its history beside a CPU hog, 2 times in 21 runs
# of test_without_interrupt_a_message_waits_for_the_step_boundary; the history replays cleanly
# (tests/integration/test_every_task_replays.py keeps it). A worker with a cache answers queries
# from the run it holds and builds none for them.
CACHE_ZERO_QUERY_RACE = "Attempted to check for LA marker handling in invalid state MarkerCommandCreated"


def sdk_query_race(history: Any, failed_event_id: int, message: str) -> bool:
    """The one failed task at a cache of 0 that is sdk-core's (CACHE_ZERO_QUERY_RACE), and only
    when the retried task then completed: anything else is the session's."""
    return CACHE_ZERO_QUERY_RACE in message and any(
        event.event_id > failed_event_id and event.HasField("workflow_task_completed_event_attributes")
        for event in history.events
    )


async def failed_workflow_tasks(client: Client, query_text: str, cache_zero: bool = bool(REPLAY_TIER_CACHE)) -> list[str]:
    """Every WorkflowTaskFailed event of the runs a visibility query finds, with its cause.
    Operators alert on these: a session that works only after a retried task still pages someone.
    `cache_zero`: the runs were on a worker that caches none (CACHE_ZERO_QUERY_RACE)."""
    failed = []
    async for execution in client.list_workflows(query_text):
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        for event in history.events:
            attributes = event.workflow_task_failed_event_attributes
            # A reset records a failed task where it cut the history, and one it cut short in
            # the run it ended (FORCE_CLOSE_COMMAND): those are the operator's, not the session's.
            if (event.HasField("workflow_task_failed_event_attributes") and attributes.cause not in OPERATOR_CAUSES
                    and not (cache_zero and sdk_query_race(history, event.event_id, attributes.failure.message))):
                failed.append(f"{execution.id} event {event.event_id}: "
                              f"{WorkflowTaskFailedCause.Name(attributes.cause)}: {attributes.failure.message[:300]} "
                              f"(after {events_before(history, event.event_id)})")
    return failed


def events_before(history: WorkflowHistory, event_id: int, count: int = 8) -> str:
    """The kinds of the `count` events before `event_id`: what a failed task followed, in a failure's message."""
    return ", ".join(EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
                     for e in history.events if event_id - count <= e.event_id < event_id)


async def record_if_asked(client: Client, task_queue: str, since: datetime | None = None) -> None:
    """Keep every run the current test made on `task_queue` (started at `since` or later) for the
    replay corpus, when HITL_RECORD_HISTORIES names a folder. Tests that run their own workers
    or servers call it themselves before they stop the server."""
    if not RECORD_HISTORIES_TO:
        return
    folder = Path(RECORD_HISTORIES_TO)
    folder.mkdir(parents=True, exist_ok=True)
    test = current_test_name()
    if test not in _recorded_tests:  # re-recording a test replaces what it recorded before
        _recorded_tests.add(test)
        for old in folder.glob(f"{test}--*.json"):
            old.unlink()
    query_text = f"TaskQueue = '{task_queue}'"
    if since is not None:
        query_text += f" AND StartTime >= '{since.astimezone(timezone.utc).isoformat()}'"
    # One execution per run: a session that continued as new is kept run by run.
    async for execution in client.list_workflows(query_text):
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        text = history.to_json()
        # Megabyte payloads add size, not coverage; a run caught before its first workflow
        # task completed has nothing to replay (and the Replayer waits on it for ever).
        if len(text) <= MAX_RECORDED_BYTES and any(event.HasField("workflow_task_completed_event_attributes") for event in history.events):
            (folder / history_file_name(test, execution.id, execution.run_id)).write_text(text)


_recorded_tests: set[str] = set()


MAX_RECORDED_BYTES = 1_000_000


def current_test_name() -> str:
    """The running test as `test_name[param id]`, made safe for a file name."""
    node = os.environ.get("PYTEST_CURRENT_TEST", "test").split("::")[-1].rsplit(" ", 1)[0]
    return re.sub(r"[^\w.\[\]-]+|-{2,}", "_", node)


def history_file_name(test: str, workflow_id: str, run_id: str) -> str:
    """A child session's id has slashes (`<parent>/<agent>/<n>`): written %2F in a file's name."""
    return f"{test}--{workflow_id.replace('/', '%2F')}--{run_id}.json"


def parse_history_file_name(path: Path) -> tuple[str, str, str]:
    """(scenario, workflow id, run id) of a corpus file; the scenario is the test's name without params.
    A file recorded before names carried the run id has "" for it."""
    test, _, rest = path.stem.partition("--")
    workflow_id, _, run_id = rest.rpartition("--")
    if not workflow_id:
        workflow_id, run_id = rest, ""
    return test.split("[")[0], workflow_id.replace("%2F", "/"), run_id


async def eventually(
    probe: Callable[[], Awaitable[T]], until: Callable[[T], bool], timeout: float = 60, every: float = 0.05
) -> T:
    """Poll a query until what it returns satisfies `until`; fail with the last value.

    A query can fail for a moment after a worker restart (it is routed to the
    old worker's sticky queue first), so a failed probe is simply tried again.
    """
    every = max(every, POLL_AT_LEAST_SECONDS)
    timeout *= PATIENCE
    deadline = asyncio.get_running_loop().time() + timeout
    value: Any = None
    while True:
        try:
            value = await probe()
        except RPCError as error:
            value = error
        else:
            if until(value):
                return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value: {value!r}")
        await asyncio.sleep(every)


async def in_time(awaitable: Awaitable[T], seconds: float = 60, what: str | None = None) -> T:
    """`awaitable`'s result, or asyncio.TimeoutError once `seconds` times the patience have passed
    (an AssertionError naming `what` when given): a guard against a hang, never a speed test, so
    its bound is what no busy machine needs."""
    bound = seconds * PATIENCE
    try:
        return await asyncio.wait_for(awaitable, bound)
    except asyncio.TimeoutError:
        if what is None:
            raise
        raise AssertionError(f"{what} did not finish within {bound:.0f} s") from None


async def in_flight(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """What the server holds a session busy with: its pending activities and workflow task."""
    return busy_with((await handle.describe()).raw_description)


def busy_with(description: DescribeWorkflowExecutionResponse) -> list[str]:
    busy = [f"activity {a.activity_type.name} ({PendingActivityState.Name(a.state)}, attempt {a.attempt})"
            for a in description.pending_activities]
    if description.HasField("pending_workflow_task"):
        busy.append(f"a workflow task ({PendingWorkflowTaskState.Name(description.pending_workflow_task.state)})")
    return busy


async def at_rest(handle: WorkflowHandle[Any, Any]) -> None:
    """Until the session has nothing in flight (no activity, no workflow task): only waiting, as it
    must be before its last worker goes when the test means nothing to be lost or left running."""
    await eventually(lambda: in_flight(handle), lambda busy: not busy)


FAST_FORWARD_SECONDS = 120


async def fast_forward(env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any], seconds: float) -> bool:
    """`env.fast_forward` of the session's clock, bounded. The time-skipping server skips only while
    the session has nothing in flight: a pending activity or workflow task holds the clock until a
    worker takes it, so with no worker running the fast-forward would wait for ever. Fails with
    what held it. True once the clock got there; False if the session closed first."""
    try:
        return await asyncio.wait_for(env.fast_forward(handle, seconds), FAST_FORWARD_SECONDS * PATIENCE)
    except asyncio.TimeoutError:
        held_by = ", ".join(await in_flight(handle)) or "nothing in flight now"
        raise AssertionError(f"{handle.id}: a fast-forward of {seconds} s did not finish within "
                             f"{FAST_FORWARD_SECONDS * PATIENCE:.0f} s; the server holds the clock for {held_by} "
                             "(time skips only while nothing is in flight, and only a worker moves that on)") from None


QUERY_RPC = timedelta(seconds=3)
QUERY_PATIENCE_SECONDS = 60


async def query(handle: WorkflowHandle[Any, Any], name: str) -> Any:
    """One answer to a query. An answer that is only late (the worker busy, the machine shared) is
    asked for again, for a minute times the patience: slow is not wrong. Any other error is raised
    at once, for the test to judge."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + QUERY_PATIENCE_SECONDS * PATIENCE
    while True:
        try:
            return await handle.query(name, rpc_timeout=QUERY_RPC)
        except RPCError as error:
            if not only_late(error) or loop.time() > deadline:
                raise


def only_late(error: RPCError) -> bool:
    """The client's own deadline passed (the SDK says CANCELLED, "Timeout expired") or the server's."""
    return error.status == RPCStatusCode.DEADLINE_EXCEEDED or (
        error.status == RPCStatusCode.CANCELLED and "timeout" in error.message.lower())


async def pending_items(handle: WorkflowHandle[Any, Any], count: int = 1) -> list[dict[str, Any]]:
    return await eventually(lambda: query(handle, "pending"), lambda items: len(items) >= count)


async def settled(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """The status once the current turn is over and nothing is waiting."""
    return await eventually(
        lambda: query(handle, "status"),
        lambda s: s["state"] in ("idle", "closed") and s["queued_messages"] == 0,
    )


async def pending_of_kind(handle: WorkflowHandle[Any, Any], kind: str) -> dict[str, Any]:
    items = await eventually(lambda: query(handle, "pending"), lambda items: any(i["kind"] == kind for i in items))
    return next(item for item in items if item["kind"] == kind)


async def refused_update(handle: WorkflowHandle[Any, Any], name: str, payload: Any) -> str:
    """The reason an Update was rejected with (the test fails if it was accepted)."""
    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await handle.execute_update(name, payload)
    return failure.value.cause.message


def assert_well_formed(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call has exactly one result before anything else follows."""
    expected: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in expected, f"unexpected tool result {message}"
            expected.remove(message["tool_call_id"])
            continue
        assert not expected, f"calls {expected} have no result before {message}"
        if message["role"] == "assistant":
            expected = [call["id"] for call in message.get("tool_calls") or []]
            assert len(set(expected)) == len(expected), f"duplicate call ids in {message}"
    assert not expected, f"calls {expected} have no result at the end"


class GatedModel(OfflineModel):
    """The offline model, but each call after the first `free_calls` waits until the test opens the gate."""

    def __init__(self, free_calls: int = 0) -> None:
        self.gate = asyncio.Event()
        self.free_calls = free_calls
        self.calls = 0
        self.cancelled = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        try:
            if self.calls > self.free_calls:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await super().complete(request)
