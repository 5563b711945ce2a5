"""What each of the three pieces that rely on the SDK's insides saves today, on and off side by side.

    python -m bench.sdk_insides [--rounds 5] [--sessions 20] [--asks 2000] [--queries 10]

- a new session: the sandbox's work for it (`create_instance` of AgentWorkflow, as the worker's
  runner does it) and how many workflow modules it imported again. hitl/bytecode.py kept their
  compiled code for each new session; it is gone, as none is imported again (docs/evidence.md).
- context-free sandbox (hitl/sandbox_runner.py, HITL_CONTEXT_FREE_SANDBOX): one serialization-
  context ask of the SDK's instance, which enters the sandbox, against ours, which does not.
  The SDK asks once for every payload of an activation and of its completion.
- query buffer retry (hitl/client/queries.py, HITL_QUERY_BUFFER_RETRY): its own dev server and an
  in-process worker; two queries sent together while an Update holds the workflow's task in
  flight (a 100 ms local activity), as readers meet it while people decide; the slower one's
  latency. Beside it, one query with no task in flight.

On and off alternate within each round; each line is the median over rounds, with off/on.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.abc
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Callable

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from hitl.devserver import free_port, start_dev_server, stop_dev_server
from hitl.plugin import SANDBOX, workflow_runner
from hitl.client.queries import query_now
from hitl.sdk_shortcuts import QUERY_BUFFER_RETRY, CONTEXT_FREE_SANDBOX
from hitl.settings import DATA_CONVERTER
from tests.support.workflow_instances import agent_run_details

HOLD_SECONDS = 0.1


def new_sessions(count: int) -> tuple[float, int]:
    """Milliseconds of sandbox set-up per new session (the first untimed), and the number of
    workflow modules the sandbox imported again for them."""
    runner = SandboxedWorkflowRunner(restrictions=SANDBOX)
    runner.create_instance(agent_run_details())
    seen = ModulesLookedFor()
    sys.meta_path.insert(0, seen)
    try:
        started = time.perf_counter()
        for _ in range(count):
            runner.create_instance(agent_run_details())
        return (time.perf_counter() - started) / count * 1000, len(seen.names)
    finally:
        sys.meta_path.remove(seen)


class ModulesLookedFor(importlib.abc.MetaPathFinder):
    """Notes each workflow module the import system looks for (the sandbox's imports too), finds none."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == "workflows" or fullname.startswith("workflows."):
            self.names.add(fullname)
        return None


def context_asks(count: int, on: bool) -> float:
    """Microseconds per serialization-context ask, as the worker's runner answers it."""
    os.environ[CONTEXT_FREE_SANDBOX] = "on" if on else "off"
    try:
        instance = workflow_runner(DATA_CONVERTER).create_instance(agent_run_details())
    finally:
        del os.environ[CONTEXT_FREE_SANDBOX]
    started = time.perf_counter()
    for _ in range(count):
        instance.get_serialization_context(None)
    return (time.perf_counter() - started) / count * 1e6


@activity.defn
async def hold_the_task() -> None:
    await asyncio.sleep(HOLD_SECONDS)


@workflow.defn(sandboxed=False)
class HeldByUpdates:
    def __init__(self) -> None:
        self.accepted = 0

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def accept(self) -> int:
        await workflow.execute_local_activity(hold_the_task, start_to_close_timeout=timedelta(seconds=30))
        self.accepted += 1
        return self.accepted

    @workflow.query
    def count(self) -> int:
        return self.accepted


async def timed_query(client: Client, session_id: str) -> float:
    started = time.perf_counter()
    await query_now(client, session_id, "count")
    return (time.perf_counter() - started) * 1000


async def queries_during_an_update(client: Client, session_id: str, count: int, on: bool) -> float:
    """Median milliseconds of the slower of two queries sent together while an Update holds the task."""
    os.environ[QUERY_BUFFER_RETRY] = "on" if on else "off"
    slower = []
    try:
        handle = client.get_workflow_handle(session_id)
        for _ in range(count):
            update = asyncio.create_task(handle.execute_update(HeldByUpdates.accept))
            await asyncio.sleep(HOLD_SECONDS / 4)  # the Update's task is running its local activity by now
            slower.append(max(await asyncio.gather(timed_query(client, session_id), timed_query(client, session_id))))
            await update
    finally:
        del os.environ[QUERY_BUFFER_RETRY]
    return statistics.median(slower)


async def quiet_queries(client: Client, session_id: str, count: int, on: bool) -> float:
    os.environ[QUERY_BUFFER_RETRY] = "on" if on else "off"
    try:
        return statistics.median([await timed_query(client, session_id) for _ in range(count)])
    finally:
        del os.environ[QUERY_BUFFER_RETRY]


Figures = dict[str, list[tuple[float, float]]]  # what -> (on, off) per round


def side_by_side(figures: Figures, what: str, measure: Callable[[bool], float]) -> None:
    on, off = measure(True), measure(False)
    figures.setdefault(what, []).append((on, off))


async def measure_queries(args: argparse.Namespace, figures: Figures, folder: Path) -> None:
    server = start_dev_server(folder / "temporal.db", port=(port := free_port()), ui_port=free_port())
    try:
        client = await Client.connect(f"127.0.0.1:{port}")
        queue, session_id = f"bench-{uuid.uuid4().hex[:8]}", f"held-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[HeldByUpdates], activities=[hold_the_task]):
            await client.start_workflow(HeldByUpdates.run, id=session_id, task_queue=queue)
            await query_now(client, session_id, "count")  # the first task is done
            for _ in range(args.rounds):
                for what, measure in (("query, an Update's task in flight (ms)", queries_during_an_update),
                                      ("query, no task in flight (ms)", quiet_queries)):
                    on = await measure(client, session_id, args.queries, True)
                    off = await measure(client, session_id, args.queries, False)
                    figures.setdefault(what, []).append((on, off))
            await client.get_workflow_handle(session_id).terminate()
    finally:
        stop_dev_server(server)


def print_table(figures: Figures) -> None:
    print(f"{'':52} {'on':>10} {'off':>10} {'off/on':>8}")
    for what, pairs in figures.items():
        on = statistics.median(pair[0] for pair in pairs)
        off = statistics.median(pair[1] for pair in pairs)
        print(f"{what:52} {on:10.3f} {off:10.3f} {off / on:7.2f}x")


async def main(args: argparse.Namespace) -> None:
    figures: Figures = {}
    sessions = [new_sessions(args.sessions) for _ in range(args.rounds)]
    print(f"new session: {statistics.median(ms for ms, _ in sessions):.3f} ms of sandbox set-up, "
          f"{max(count for _, count in sessions)} workflow modules imported again")
    for _ in range(args.rounds):
        side_by_side(figures, "context ask (us)", lambda on: context_asks(args.asks, on))
    with tempfile.TemporaryDirectory() as scratch:
        await measure_queries(args, figures, Path(scratch))
    print_table(figures)


def command_line() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=20, help="new sessions per round and setting")
    parser.add_argument("--asks", type=int, default=2000, help="context asks per round and setting")
    parser.add_argument("--queries", type=int, default=10, help="queries per round and setting")
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    command_line()
