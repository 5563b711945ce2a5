"""A worker for the fault drill: the product's worker with time to be killed in, and a log of its attempts.

The offline model thinks for a moment and every tool pauses before and after
its side effect, so a SIGKILL lands mid model call, mid tool (before or after
the effect) and mid decision, as it would with real latencies.

Every model call and tool attempt is appended to the attempt log
(HITL_ATTEMPT_LOG, JSON lines, O_APPEND and fsync, so a line written is a line
kept whatever kills the process next): `started` before anything happens,
`effect` right after the tool ran with the evidence of its side effect then
visible (a booking row, an outbox file, a file gone), `completed` or `failed`
when the attempt ends. An attempt with no end is one its worker was killed
in. The drill counts, from this log, how many times each approved call had
its effect.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from temporalio import activity

from activities.offline_model import OfflineModel
from activities.run_tool import ToolActivities
from hitl.settings import Settings, connect
from hitl.worker import build_worker
from workflows.conversation import ModelReply
from workflows.requests import ModelRequest, ToolInvocation

PAUSE = float(os.environ.get("FAULT_PAUSE_SECONDS", "0.3"))
ATTEMPT_LOG = Path(os.environ.get("HITL_ATTEMPT_LOG", "attempts.jsonl"))
chance = random.Random(os.environ.get("HITL_FAULT_WORKER_SEED"))


def append_line(path: Path, entry: dict[str, Any]) -> None:
    """One JSON line, appended atomically (short lines, O_APPEND) and on disk before we go on."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, (json.dumps(entry) + "\n").encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The complete lines so far (a line being written by a live worker is left for next time)."""
    if not path.exists():
        return []
    *complete, _partial = path.read_text().split("\n")
    return [json.loads(line) for line in complete]


def evidence(workspace: Path, session_id: str, tool: str, args: dict[str, Any]) -> int:
    """How many times the side effect of `tool` for this session is visible in the workspace now.

    Counted per session, not per call id, so a tool that lost its idempotency
    key still shows every effect it had: each drill session makes one such call.
    """
    if tool == "book_flight":
        database = workspace / "bookings.sqlite"
        if not database.exists():
            return 0
        with closing(sqlite3.connect(database)) as db:
            try:
                return db.execute("SELECT COUNT(*) FROM bookings WHERE session_id = ?", (session_id,)).fetchone()[0]
            except sqlite3.OperationalError:  # no table yet
                return 0
    if tool == "send_email":
        return len(list((workspace / "outbox").glob(f"{session_id}--*.eml")))
    if tool == "delete_file":
        return 0 if os.path.lexists(workspace / str(args.get("path", ""))) else 1
    return 0


def attempt_entry(kind: str, call: str, **extra: Any) -> dict[str, Any]:
    info = activity.info()
    return {"kind": kind, "session": info.workflow_id, "call": call, "attempt": info.attempt,
            "pid": os.getpid(), "at": time.time(), **extra}


class ThoughtfulModel(OfflineModel):
    async def complete(self, request: ModelRequest) -> ModelReply:
        entry = attempt_entry("model", activity.info().activity_id)
        append_line(ATTEMPT_LOG, {**entry, "phase": "started"})
        try:
            await asyncio.sleep(chance.uniform(0, PAUSE))
            reply = await super().complete(request)
        except BaseException as error:
            append_line(ATTEMPT_LOG, {**entry, "phase": "failed", "error": type(error).__name__})
            raise
        append_line(ATTEMPT_LOG, {**entry, "phase": "completed"})
        return reply


class LoggedSlowTools(ToolActivities):
    async def _run(self, invocation: ToolInvocation) -> str:
        def seen() -> int:
            return evidence(self.workspace, invocation.session_id, invocation.tool, invocation.args)

        entry = attempt_entry("tool", invocation.call_id, tool=invocation.tool, args=invocation.args)
        append_line(ATTEMPT_LOG, {**entry, "phase": "started", "evidence": seen()})
        try:
            await asyncio.sleep(chance.uniform(0, PAUSE))
            result = await super()._run(invocation)
            append_line(ATTEMPT_LOG, {**entry, "phase": "effect", "evidence": seen()})
            await asyncio.sleep(chance.uniform(0, PAUSE))
        except BaseException as error:
            append_line(ATTEMPT_LOG, {**entry, "phase": "failed", "error": type(error).__name__, "evidence": seen()})
            raise
        append_line(ATTEMPT_LOG, {**entry, "phase": "completed"})
        return result


async def main() -> None:
    settings = Settings.from_env()
    client = await connect(settings)
    workspace = Path(settings.workspace)
    worker = build_worker(client, settings.task_queue, ThoughtfulModel(), workspace, tools=LoggedSlowTools(workspace))
    print("fault worker ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
