"""Following a session live: hitl/client/events.py, `python starter.py watch <session>`, and the
spinner line that the chat and `watch` show on a terminal while the agent works.

The follower's rules (resync when events are gone, pages read back to back, a
backoff capped at a second, stopping when the session ends) are checked against
a scripted log; the rest are stories through a real dev server and worker,
`watch` run as users run it, piped and on a terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

import hitl.client.events
from hitl.client.events import RESYNC, SessionEvent, follow_events
from hitl.console.watch import describe_event
from tests.support.sessions import Agent, GatedModel, eventually, pending_items, query
from tests.integration.test_cli import ROOT, address
from tests.integration.test_sub_agents import JANITOR, delegating, root_pending  # noqa: F401  (a fixture)

DELETE = "please delete notes.txt"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# ------------------------------------------------------------------ the follower's rules, on a scripted log

class ScriptedLog:
    """A session's `events` query as the workflow contract serves it: the newest `kept` events."""

    def __init__(self, kept: int = 500) -> None:
        self.id = "scripted"
        self.kept = kept
        self.events: list[dict[str, Any]] = []
        self.last = 0
        self.reads: list[int] = []  # the `after` of each read
        self.before_read: list[Any] = []  # what to do before answering read n: a callable or an exception
        self.status = WorkflowExecutionStatus.RUNNING

    def add(self, type_: str, **data: Any) -> None:
        self.last += 1
        self.events.append({"id": self.last, "at": "2026-01-01T00:00:00Z", "type": type_, "data": data})
        del self.events[: max(0, len(self.events) - self.kept)]

    async def query(self, name: str, request: dict[str, Any], rpc_timeout: Any = None) -> dict[str, Any]:
        assert name == "events"
        self.reads.append(request["after"])
        if self.before_read:
            step = self.before_read.pop(0)
            if isinstance(step, Exception):
                raise step
            if step:
                step()
        chosen = [e for e in self.events if e["id"] > request["after"]][: request["limit"]]
        return {"events": chosen, "oldest": self.events[0]["id"] if self.events else self.last + 1, "last": self.last}

    async def describe(self, rpc_timeout: Any = None) -> Any:
        return SimpleNamespace(status=self.status)

    def get_workflow_handle(self, session_id: str) -> ScriptedLog:
        return self

    @staticmethod
    async def ask(log: Any, session_id: str, name: str, arg: Any = None, *, rpc_timeout: Any = None) -> Any:
        """Sends the follower's query to the log it is given as its client (hitl.client.queries.Ask)."""
        return await log.query(name, arg, rpc_timeout=rpc_timeout)


async def followed(log: ScriptedLog, after: int = 0, **options: Any) -> list[SessionEvent]:
    return [event async for event in follow_events(log, "scripted", after, ask=log.ask, **options)]  # type: ignore[arg-type]


async def test_a_follower_that_fell_behind_gets_one_resync_then_every_kept_event_in_pages() -> None:
    log = ScriptedLog(kept=500)
    for n in range(700):
        log.add("message", text=f"m{n}")
    log.add("state", state="closed")
    events = await followed(log, after=0, page=200)
    assert events[0].type == RESYNC and events[0].id == 201 and events[0].data == {"after": 0, "oldest": 202, "last": 701}
    assert [event.id for event in events[1:]] == list(range(202, 702))
    assert events[-1].closes_session
    assert log.reads == [0, 401, 601], "pages are read back to back from the resync on"


async def test_a_follower_ahead_of_the_session_resyncs_to_where_the_session_is() -> None:
    log = ScriptedLog()
    for _ in range(3):
        log.add("message", text="x")
    log.before_read = [None, lambda: log.add("state", state="closed")]
    events = await followed(log, after=40, fastest=0.001)
    assert [(e.type, e.id) for e in events] == [(RESYNC, 3), ("state", 4)]


async def test_the_follower_polls_fast_while_things_happen_and_slows_to_a_second_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(hitl.client.events.asyncio, "sleep", sleep)
    log = ScriptedLog()
    log.before_read = [None] * 7 + [lambda: log.add("answer", text="hi")] + [None] * 2 + [lambda: log.add("state", state="closed")]
    events = await followed(log)
    assert [e.type for e in events] == ["answer", "state"]
    assert slept == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 0.05, 0.1, 0.2]


async def test_a_hand_over_between_runs_is_waited_out_and_a_session_that_ended_silently_stops_the_follower() -> None:
    log = ScriptedLog()
    log.add("state", state="running")
    log.before_read = [RPCError("workflow task not scheduled yet", RPCStatusCode.FAILED_PRECONDITION, b"")] * 2
    log.status = WorkflowExecutionStatus.TERMINATED  # terminated: no `closed` event will ever come
    # A follower that never stopped would poll for ever: the wait only turns that hang into a failure.
    events = await asyncio.wait_for(followed(log, fastest=0.001, slowest=0.01), timeout=60)
    assert [e.type for e in events] == ["state"]
    assert log.reads[:3] == [0, 0, 0], "the failed reads were retried from the same place"


async def test_an_unknown_session_is_said_plainly() -> None:
    log = ScriptedLog()
    log.before_read = [RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")]
    with pytest.raises(hitl.client.events.EventsUnavailable, match="no session scripted"):
        await followed(log)


def test_each_event_reads_as_one_line() -> None:
    def line(type_: str, **data: Any) -> str:
        return describe_event(SessionEvent(id=7, type=type_, data=data)).split("  ", 1)[1]

    assert line("vote", call_id="call_1", by="ana", approvals=["ana"], required_approvals=2) == (
        "✓ call_1 approved by ana, 1 of 2 approvals")
    assert line("pause_settled", call_id="call_1", tool="delete_file", outcome="rejected", by="bo", reason="keep it") == (
        "✓ call_1 rejected by bo: keep it")
    assert line("tool_result", call_id="call_2", content="Deleted a.txt.\nmore") == "← tool (call_2): Deleted a.txt."
    assert describe_event(SessionEvent(id=3, type="tool_result", data={"call_id": "c"}), {"c": "send_email"}).endswith(
        "← send_email (c): ")
    assert line("claimed", call_id="call_1", by="ana", until="2026-01-01T00:15:00Z") == (
        "call_1 claimed by ana until 2026-01-01T00:15:00Z")


# ------------------------------------------------------------------ stories on a real server

def watch_command(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "starter.py"), "watch", *args]


def user_env(agent: Agent, **extra: str) -> dict[str, str]:
    return {**os.environ, "TEMPORAL_ADDRESS": address(agent), "HITL_TASK_QUEUE": agent.task_queue, **extra}


class Watch:
    """`starter.py watch` as a user runs it, its output read line by line as it comes, so a test acts between lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.seen: list[str] = []

    @classmethod
    async def start(cls, agent: Agent, *args: str) -> Watch:
        process = await asyncio.create_subprocess_exec(
            *watch_command(*args), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=user_env(agent), cwd=ROOT,
        )
        return cls(process)

    async def until(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        try:
            while line := (await asyncio.wait_for(self.process.stdout.readline(), deadline - time.monotonic())).decode():  # type: ignore[union-attr]
                self.seen.append(line)
                if text in line:
                    return line
        except asyncio.TimeoutError:
            pass
        raise AssertionError(f"{text!r} not printed; printed: {''.join(self.seen)}")

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.process.wait(), 30)


async def test_watch_prints_each_event_as_it_happens_and_ends_when_the_session_closes(agent: Agent) -> None:
    session = await agent.start(DELETE)
    await pending_items(session)
    lines = await Watch.start(agent, session.id)
    try:
        assert 'delete_file(path="notes.txt") needs approval' in await lines.until("needs approval")
        await session.execute_update("approve_update", {"by": "ana"})
        assert "approved by ana" in await lines.until("call_1 approved")
        assert "← delete_file (call_1): Deleted notes.txt." in await lines.until("← ")
        await lines.until("Agent: Deleted notes.txt.")
        await session.execute_update("cancel_update", {"reason": "done"})
        await lines.until("state: closed")
        await lines.until(f"(session {session.id} closed)")
        assert await lines.exit_code() == 0
    finally:
        if lines.process.returncode is None:
            lines.process.kill()
    printed = "".join(lines.seen)
    assert not ANSI.search(printed), "piped, the output is plain text"
    ids = [int(match) for match in re.findall(r"^#(\d+) ", printed, re.M)]
    assert ids == list(range(1, len(ids) + 1)), "every event once, in order, from the first"


async def test_watching_a_root_shows_the_calls_waiting_in_its_children_with_their_path(delegating: Agent) -> None:
    """Given a root whose two janitors each wait for a person, `watch <root>` prints each child's
    call with its path and session as it opens, and says when one no longer waits."""
    (delegating.workspace / "menu.txt").write_text("soup\n")
    root = await delegating.start("delegate janitor: delete notes.txt || janitor: delete menu.txt",
                                  agents={"janitor": JANITOR}, by="ana")
    lines = await Watch.start(delegating, root.id)
    try:
        first = await lines.until("⏸ in janitor")
        second = await lines.until("⏸ in janitor")
        opened = {line.split("(session ")[1].split(")")[0] for line in (first, second)}
        assert opened == {f"{root.id}/janitor/1", f"{root.id}/janitor/2"}, lines.seen
        [item, _] = await root_pending(root, {("janitor",)})
        await root.signal("approve", {"call_id": item["call_id"], "by": "ana"})
        await lines.until(f"✓ {item['call_id']} no longer waits in janitor")
        await root.signal("cancel", {"reason": "done"})
        await lines.until(f"(session {root.id} closed)")
    finally:
        if lines.process.returncode is None:
            lines.process.kill()


async def test_following_a_session_goes_on_across_continue_as_new_without_a_gap(agent: Agent) -> None:
    for name in ("a.txt", "b.txt"):
        (agent.workspace / name).write_text(name)
    session = await agent.start("please delete a.txt", continue_as_new_after_events=20)
    first_run = (await session.describe()).run_id
    events: list[SessionEvent] = []

    async def follow() -> None:
        async for event in follow_events(agent.client, session.id):
            events.append(event)

    follower = asyncio.create_task(follow())
    await pending_items(session)
    await session.execute_update("approve_update", {"by": "ana"})
    latest = agent.client.get_workflow_handle(session.id)
    await eventually(lambda: latest.describe(), lambda d: d.run_id != first_run)
    await eventually(lambda: query(latest, "status"), lambda s: s["state"] == "idle")
    await latest.execute_update("user_message_update", {"text": "please delete b.txt"})
    [item] = await pending_items(latest)
    await latest.execute_update("approve_update", {"call_id": item["call_id"], "by": "ana"})
    await eventually(lambda: query(latest, "status"), lambda s: s["state"] == "idle" and s["turn"] == 2)
    await latest.execute_update("cancel_update", {"reason": "done"})
    await asyncio.wait_for(follower, 30)

    assert [event.id for event in events] == list(range(1, len(events) + 1)), "no gap, no resync, each event once"
    results = [event.data["content"] for event in events if event.type == "tool_result"]
    assert results == ["Deleted a.txt.", "Deleted b.txt."], results
    assert events[-1].closes_session


def read_terminal(fd: int, until: re.Pattern[str], timeout: float) -> str:
    """What a program printed on a pseudo-terminal, escape codes removed, up to the first match."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
            if until.search(ANSI.sub("", seen.decode(errors="replace"))):
                break
    return ANSI.sub("", seen.decode(errors="replace"))


async def test_on_a_terminal_watch_shows_the_agent_working_with_elapsed_time_and_step(
    gated_agent: tuple[Agent, GatedModel],
) -> None:
    agent, model = gated_agent
    session = await agent.start(DELETE)
    await eventually(lambda: query(session, "status"), lambda s: s["state"] == "running" and model.calls >= 1)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(watch_command(session.id), stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal,
                               env=user_env(agent, TERM="xterm-256color", COLUMNS="120"), cwd=ROOT)
    os.close(terminal)
    try:
        shown = await asyncio.to_thread(read_terminal, controller, re.compile(r"agent thinking · turn 1, step \d+ +\d+\.\ds"), 30)
        assert re.search(r"agent thinking · turn 1, step \d+ +\d+\.\ds", shown), shown
        model.gate.set()
        await pending_items(session)
        await session.execute_update("cancel_update", {"reason": "done"})
        shown += await asyncio.to_thread(read_terminal, controller, re.compile(r"closed\)"), 30)
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        process.kill()
        os.close(controller)
    assert "needs approval" in shown and f"(session {session.id} closed)" in shown


async def test_on_a_terminal_the_chat_shows_the_agent_working_until_it_asks_for_approval(
    gated_agent: tuple[Agent, GatedModel],
) -> None:
    agent, model = gated_agent
    session_id = f"chat-{agent.task_queue}"
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "starter.py"), "chat", "--session", session_id, "--by", "ana"],
        stdin=terminal, stdout=terminal, stderr=terminal, env=user_env(agent, TERM="xterm-256color", COLUMNS="120"),
        cwd=ROOT,
    )
    os.close(terminal)
    try:
        await asyncio.to_thread(read_terminal, controller, re.compile(r"You: "), 30)
        os.write(controller, f"{DELETE}\n".encode())
        working = re.compile(r"agent thinking · turn 1, step \d+ +\d+\.\ds")
        shown = await asyncio.to_thread(read_terminal, controller, working, 30)
        assert working.search(shown), shown
        model.gate.set()
        shown = await asyncio.to_thread(read_terminal, controller, re.compile(r"needs approval"), 30)
        assert 'delete_file(path="notes.txt") needs approval' in shown, shown
        os.write(controller, b"\x04")  # Ctrl-D: leave the session waiting
        shown = await asyncio.to_thread(read_terminal, controller, re.compile(r"left session"), 30)
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        process.kill()
        os.close(controller)
    assert f"(left session {session_id};" in shown
