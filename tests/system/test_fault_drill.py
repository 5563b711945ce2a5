
"""The fault drill: sessions keep their promises while workers and the server are killed.

Two worker processes (tests/support/fault_worker.py) share one task queue; a chaos
loop SIGKILLs one of them and starts it again, taking turns at aiming for a
worker in the middle of a model call, one in the middle of a tool, a moment
when a session waits for a person, and any moment at all; once it kills the
dev server itself and restarts it on its SQLite file. Meanwhile people think
for a moment and decide, retrying whatever the outage refused.

At the end every session has reached its expected end, no decision is lost,
and the workers' attempt log shows each approved call having its side effect
exactly once (and no unapproved call running at all); the kills are shown to
have landed mid model call, mid tool and while a session was paused.

HITL_FAULT_SESSIONS sets the size (12 in CI; try 100 locally). HITL_FAULT_SEED
fixes the drill's random choices (default: a fresh seed, printed): the same seed
makes the same choices, though the machine's timing still varies.
"""

from __future__ import annotations

import pytest

import asyncio
import itertools
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from contextlib import closing
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from hitl.devserver import connect_when_ready, free_port, start_dev_server, stop_dev_server
from tests.support.sessions import record_if_asked
from tests.support.fault_worker import evidence, read_log


from workflows.agent import AgentWorkflow

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = int(os.environ.get("HITL_FAULT_SESSIONS", "12"))
SEED = int(os.environ.get("HITL_FAULT_SEED") or random.SystemRandom().randrange(2**32))
SCENARIOS = ("book", "delete", "email", "reject")
DECISIONS_PER_SCENARIO = {"book": 2, "delete": 1, "email": 1, "reject": 1}
TARGETS = ("model", "tool", "paused", "any")  # what the chaos aims its kills at, in turn
RPC = timedelta(seconds=5)

CallKey = tuple[str, str]  # (session id, call id)
Attempt = tuple[str, str, str, int]  # (kind, session id, call id, attempt number)


@dataclass
class Kill:
    """What the killed worker was doing when it died, read from the attempt log."""

    pid: int
    aimed_at: str
    doing: list[str]
    paused_sessions: int


@dataclass
class Drill:
    folder: Path
    rng: random.Random
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    task_queue: str = "fault-drill"
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_starts: int = 0
    server: subprocess.Popen[bytes] | None = None
    kills: list[Kill] = field(default_factory=list)
    server_kills: int = 0
    refused_while_down: int = 0
    paused: set[str] = field(default_factory=set)  # sessions a person is looking at, not yet decided
    struck: set[Attempt] = field(default_factory=set)  # attempts a kill interrupted: not aimed at again

    @property
    def workspace(self) -> Path:
        return self.folder / "workspace"

    @property
    def attempt_log(self) -> Path:
        return self.folder / "attempts.jsonl"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_server(self) -> None:
        self.server = start_dev_server(self.folder / "temporal.db", port=self.port, ui_port=self.ui_port)

    def start_worker(self, index: int) -> None:
        self.worker_starts += 1
        env = {**os.environ, "TEMPORAL_ADDRESS": self.address, "HITL_TASK_QUEUE": self.task_queue,
               "HITL_WORKSPACE": str(self.workspace), "HITL_ATTEMPT_LOG": str(self.attempt_log),
               "HITL_FAULT_WORKER_SEED": f"{SEED}-{self.worker_starts}"}
        log = open(self.folder / f"worker-{index}.log", "ab")
        process = subprocess.Popen([sys.executable, "-m", "tests.support.fault_worker"], cwd=ROOT, env=env, stdout=log, stderr=log)
        if index < len(self.workers):
            self.workers[index] = process
        else:
            self.workers.append(process)

    def kill_worker(self, index: int, aimed_at: str) -> None:
        process = self.workers[index]
        process.send_signal(signal.SIGKILL)
        process.wait()
        doing = open_attempts(read_log(self.attempt_log), process.pid)
        self.struck.update(doing)
        self.kills.append(Kill(process.pid, aimed_at, sorted(doing.values()), len(self.paused)))

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()
        self.server_kills += 1

    async def victim(self, target: str, done: asyncio.Event) -> int:
        """The index of a worker caught at `target`, waiting up to 5 s for such a moment (else any worker)."""
        for _ in range(100):
            if done.is_set():
                break
            if target == "paused" and self.paused:
                break
            if target in ("model", "tool"):
                # Aim at calls not struck before: each kill mid-activity costs that session a heartbeat timeout.
                entries = read_log(self.attempt_log)
                struck_calls = {(session, call) for _, session, call, _ in self.struck}
                busy = [i for i, worker in enumerate(self.workers)
                        if any(kind == target and (session, call) not in struck_calls
                               for kind, session, call, _ in open_attempts(entries, worker.pid))]
                if busy:
                    return self.rng.choice(busy)
            if target == "any":
                break
            await asyncio.sleep(0.05)
        return self.rng.randrange(len(self.workers))

    async def chaos(self, done: asyncio.Event) -> None:
        for target in itertools.cycle(TARGETS):
            await asyncio.sleep(self.rng.uniform(0.4, 1.2))
            index = await self.victim(target, done)
            if done.is_set():
                return
            self.kill_worker(index, target)
            if len(self.kills) == 3:
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


def open_attempts(entries: list[dict[str, Any]], pid: int) -> dict[Attempt, str]:
    """What worker `pid` had started and not finished: "model", "tool <name> before its effect" or "... after"."""
    running: dict[Attempt, str] = {}
    for entry in entries:
        if entry["pid"] != pid:
            continue
        key = (entry["kind"], entry["session"], entry["call"], entry["attempt"])
        if entry["phase"] == "started":
            running[key] = "model" if entry["kind"] == "model" else f"tool {entry['tool']} before its effect"
        elif entry["phase"] == "effect":
            running[key] = f"tool {entry['tool']} after its effect"
        else:
            running.pop(key, None)
    return running


def effects_per_attempt(entries: list[dict[str, Any]], workspace: Path) -> dict[CallKey, list[tuple[int, int]]]:
    """For each tool call in the log, (pid, effects) of every attempt, in the order they ran.

    An attempt's effects are the evidence it left (from its `started` line to its
    `effect` or `failed` line). An attempt killed before writing either is
    charged with whatever changed until the next attempt started (or until now).
    """
    attempts: dict[CallKey, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry["kind"] != "tool":
            continue
        mine = attempts[(entry["session"], entry["call"])]
        if entry["phase"] == "started":
            mine.append({**entry, "until": None})
        elif entry["phase"] in ("effect", "failed"):
            attempt = next(a for a in reversed(mine) if (a["pid"], a["attempt"]) == (entry["pid"], entry["attempt"]))
            if attempt["until"] is None:
                attempt["until"] = entry["evidence"]
    result = {}
    for key, mine in attempts.items():
        ends = [a["until"] for a in mine]
        for n, attempt in enumerate(mine):
            if ends[n] is None:
                ends[n] = mine[n + 1]["evidence"] if n + 1 < len(mine) else evidence(
                    workspace, attempt["session"], attempt["tool"], attempt["args"])
        result[key] = [(a["pid"], end - a["evidence"]) for a, end in zip(mine, ends)]
    return result


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
    """Act as the person: start the session, think, decide what it asks, retry through outages."""
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
                drill.paused.add(session_id)
                await asyncio.sleep(drill.rng.uniform(0.1, 0.6))  # a person reads before deciding
                update, payload = decision_for(scenario, item)
                try:
                    await handle.execute_update(update, payload, rpc_timeout=RPC)
                except WorkflowUpdateFailedError as refused:
                    # "already settled": an earlier attempt landed before the outage hid its reply.
                    # "unknown call_id": the query saw a step a killed worker never committed; the
                    # next worker redoes that step and the item comes back, so ask again.
                    reason = refused.cause.message
                    assert "already settled" in reason or "unknown call_id" in reason, reason
            drill.paused.discard(session_id)
            if status["state"] == "idle" and status["last_answer"] and not status["pending"]:
                return status
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError):
            drill.refused_while_down += 1
        await asyncio.sleep(0.2)


def bookings_per_session(workspace: Path) -> Counter[str]:
    with closing(sqlite3.connect(workspace / "bookings.sqlite")) as db:
        return Counter(row[0] for row in db.execute("SELECT session_id FROM bookings"))


def check_exactly_once(effects: dict[CallKey, list[tuple[int, int]]], approved: set[CallKey]) -> list[str]:
    """Every approved call had its effect once, and nothing else ran: the problems, if any."""
    problems = []
    for key in sorted(approved | set(effects)):
        per_attempt = effects.get(key, [])
        total = sum(count for _, count in per_attempt)
        if key not in approved:
            problems.append(f"{key} ran without an approval: attempts (pid, effects) {per_attempt}")
        elif total != 1:
            problems.append(f"{key} had its side effect {total} times: attempts (pid, effects) {per_attempt}")
    return problems


async def test_sessions_survive_killed_workers_and_a_killed_server(tmp_path: Path) -> None:
    print(f"\nfault drill seed: {SEED} (HITL_FAULT_SEED={SEED} repeats its choices)")
    drill = Drill(tmp_path, random.Random(SEED))
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
        await record_if_asked(client, drill.task_queue)
    finally:
        done.set()
        drill.stop()

    # From the attempt log: each approved call had its effect exactly once, nothing unapproved ran.
    approved = {(sid, e["call_id"]) for sid, audit in audits.items() for e in audit if e["event"] == "approved"}
    effects = effects_per_attempt(read_log(drill.attempt_log), drill.workspace)
    problems = check_exactly_once(effects, approved)
    assert not problems, f"seed {SEED}:\n" + "\n".join(problems)

    # The kills landed where they were meant to.
    landed = Counter(doing.split(" ")[0] for kill in drill.kills for doing in kill.doing)
    landed["paused"] = sum(1 for kill in drill.kills if kill.paused_sessions)
    assert landed["model"] and landed["tool"] and landed["paused"], (SEED, landed, drill.kills)

    # And on disk, and in each session's own account.
    bookings = bookings_per_session(drill.workspace)
    emails = Counter(p.name.split("--")[0] for p in (drill.workspace / "outbox").glob("*.eml"))
    ends: Counter[str] = Counter()
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
    assert len(drill.kills) >= 3 and drill.server_kills == 1

    attempts = sum(len(per_attempt) for per_attempt in effects.values())
    report = (
        f"fault drill (seed {SEED}): {SESSIONS} sessions, {len(drill.kills)} worker kills "
        f"(mid model call {landed['model']}, mid tool {landed['tool']}, while a session was paused "
        f"{landed['paused']}), {drill.server_kills} server kill, {drill.refused_while_down} calls refused "
        f"during outages; ends {dict(ends)}; {len(approved)} approved calls in {attempts} tool attempts, "
        f"each with its side effect exactly once ({sum(bookings.values())} bookings, "
        f"{sum(emails.values())} emails, {ends['delete']} deletions, {ends['reject']} files kept)"
    )
    print(report)
    (tmp_path / "report.txt").write_text(report)
