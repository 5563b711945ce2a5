"""The fault drill: sessions keep their promises while workers and the server are killed.

Two worker processes share one task queue; a chaos loop SIGKILLs one of them
at random moments (mid model call, mid tool, mid decision) and starts it
again, and once kills the dev server itself and restarts it on its SQLite
file. Meanwhile people decide, retrying whatever the outage refused. At the
end every session must have reached its expected end, every approved side
effect must have happened exactly once, and no decision may be lost.

HITL_FAULT_SESSIONS sets the size (12 in CI; try 100 locally).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from workflows.agent import AgentWorkflow

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = int(os.environ.get("HITL_FAULT_SESSIONS", "12"))
SCENARIOS = ("book", "delete", "email", "reject")
DECISIONS_PER_SCENARIO = {"book": 2, "delete": 1, "email": 1, "reject": 1}
RPC = timedelta(seconds=5)


@dataclass
class Drill:
    folder: Path
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    task_queue: str = "fault-drill"
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    server: subprocess.Popen[bytes] | None = None
    worker_kills: int = 0
    server_kills: int = 0
    refused_while_down: int = 0

    @property
    def workspace(self) -> Path:
        return self.folder / "workspace"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_server(self) -> None:
        self.server = start_dev_server(self.folder / "temporal.db", port=self.port, ui_port=self.ui_port)

    def start_worker(self, index: int) -> None:
        env = {**os.environ, "TEMPORAL_ADDRESS": self.address, "HITL_TASK_QUEUE": self.task_queue,
               "HITL_WORKSPACE": str(self.workspace)}
        log = open(self.folder / f"worker-{index}.log", "ab")
        process = subprocess.Popen([sys.executable, "-m", "tests.fault_worker"], cwd=ROOT, env=env, stdout=log, stderr=log)
        if index < len(self.workers):
            self.workers[index] = process
        else:
            self.workers.append(process)

    def kill_worker(self, index: int) -> None:
        self.workers[index].send_signal(signal.SIGKILL)
        self.workers[index].wait()
        self.worker_kills += 1

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()
        self.server_kills += 1

    async def chaos(self, done: asyncio.Event) -> None:
        while not done.is_set():
            await asyncio.sleep(random.uniform(0.4, 1.2))
            if done.is_set():
                return
            index = random.randrange(len(self.workers))
            self.kill_worker(index)
            if self.worker_kills == 3:
                self.kill_server()
                await asyncio.sleep(0.5)
                await asyncio.to_thread(self.start_server)
            self.start_worker(index)

    def stop(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
        if self.server is not None:
            stop_dev_server(self.server)


def scenario_message(scenario: str, session_id: str) -> str:
    return {
        "book": "book me a flight to Beijing on 2026-12-24",
        "delete": f"please delete {session_id}.txt",
        "reject": f"please delete {session_id}.txt",
        "email": f"send an email to {session_id}@example.com about drill saying hello",
    }[scenario]


def decision_for(scenario: str, item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if item["kind"] == "question":
        return "answer_update", {"call_id": item["call_id"], "answer": "Shanghai", "by": "drill"}
    if scenario == "reject":
        return "reject_update", {"call_id": item["call_id"], "reason": "drill says no", "by": "drill"}
    return "approve_update", {"call_id": item["call_id"], "by": "drill"}


async def drive(client: Client, drill: Drill, session_id: str, scenario: str) -> dict[str, Any]:
    """Act as the person: start the session, decide what it asks, retry through outages."""
    handle = client.get_workflow_handle(session_id)
    while True:
        try:
            await client.start_workflow(AgentWorkflow.run, {"message": scenario_message(scenario, session_id)},
                                        id=session_id, task_queue=drill.task_queue, rpc_timeout=RPC)
            break
        except WorkflowAlreadyStartedError:
            break
        except RPCError:
            drill.refused_while_down += 1
            await asyncio.sleep(0.3)
    while True:
        try:
            status = await handle.query("status", rpc_timeout=RPC)
            for item in await handle.query("pending", rpc_timeout=RPC):
                update, payload = decision_for(scenario, item)
                try:
                    await handle.execute_update(update, payload, rpc_timeout=RPC)
                except WorkflowUpdateFailedError as refused:
                    # "already settled": an earlier attempt landed before the outage hid its reply.
                    # "unknown call_id": the query saw a step a killed worker never committed; the
                    # next worker redoes that step and the item comes back, so ask again.
                    reason = refused.cause.message
                    assert "already settled" in reason or "unknown call_id" in reason, reason
            if status["state"] == "idle" and status["last_answer"] and not status["pending"]:
                return status
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError):
            drill.refused_while_down += 1
        await asyncio.sleep(0.2)


def bookings_per_session(workspace: Path) -> Counter[str]:
    with closing(sqlite3.connect(workspace / "bookings.sqlite")) as db:
        return Counter(row[0] for row in db.execute("SELECT session_id FROM bookings"))


async def test_sessions_survive_killed_workers_and_a_killed_server(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.workspace.mkdir()
    plan = {f"drill-{n:03d}": SCENARIOS[n % len(SCENARIOS)] for n in range(SESSIONS)}
    for session_id, scenario in plan.items():
        if scenario in ("delete", "reject"):
            (drill.workspace / f"{session_id}.txt").write_text("precious")
    drill.start_server()
    done = asyncio.Event()
    try:
        drill.start_worker(0)
        drill.start_worker(1)
        client = await connect_when_ready(drill.address)
        chaos = asyncio.create_task(drill.chaos(done))
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(drive(client, drill, sid, scenario) for sid, scenario in plan.items())), timeout=600
        )
        done.set()
        await chaos
        audits = {sid: await client.get_workflow_handle(sid).query("audit", rpc_timeout=timedelta(seconds=30))
                  for sid in plan}
    finally:
        done.set()
        drill.stop()

    bookings = bookings_per_session(drill.workspace)
    emails = Counter(p.name.split("--")[0] for p in (drill.workspace / "outbox").glob("*.eml"))
    ends = Counter()
    for (session_id, scenario), status in zip(plan.items(), outcomes):
        answer = status["last_answer"]
        file_there = (drill.workspace / f"{session_id}.txt").exists()
        if scenario == "book":
            assert "booking reference" in answer and bookings[session_id] == 1, (session_id, answer)
        elif scenario == "delete":
            assert answer == f"Deleted {session_id}.txt." and not file_there, (session_id, answer)
        elif scenario == "email":
            assert answer.startswith("Sent the email") and emails[session_id] == 1, (session_id, answer)
        else:
            assert answer.startswith("I did not delete") and file_there, (session_id, answer)
        decisions = [e for e in audits[session_id] if e["event"] in ("approved", "rejected", "answered")]
        assert len(decisions) == DECISIONS_PER_SCENARIO[scenario], audits[session_id]
        assert not any(e["event"] in ("timed_out", "cancelled") for e in audits[session_id])
        ends[scenario] += 1
    assert sum(bookings.values()) == ends["book"] and sum(emails.values()) == ends["email"]
    assert drill.worker_kills >= 3 and drill.server_kills == 1

    report = (
        f"fault drill: {SESSIONS} sessions, {drill.worker_kills} worker kills, {drill.server_kills} server kill, "
        f"{drill.refused_while_down} calls refused during outages; ends {dict(ends)}; "
        f"{sum(bookings.values())} bookings, {sum(emails.values())} emails, "
        f"{ends['delete']} deletions, {ends['reject']} files kept, all exactly once"
    )
    print("\n" + report)
    (tmp_path / "report.txt").write_text(report)
