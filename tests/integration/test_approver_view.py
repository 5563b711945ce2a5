"""What the person asked to decide sees, in a terminal: the card (who asked and whether that is
verified, their message, the model's text, the tool, why a person is needed, the deadline as
"in 23 h"), an inbox with column headers, a decision prompt that acts only on an unambiguous
choice (typed on a real pseudo-terminal), a date asked as a typed field, and a Temporal UI
summary for every session, however it was started.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError

from activities.offline_model import DATE_QUESTION
from hitl.console.chat import decision_of, is_command
from hitl.client.inbox import Inbox, InboxItem
from hitl.console.inbox import render_inbox
from hitl.console.render import args_diff, describe_item, relative_deadline
from hitl.startup import model_warning, port_problem, tokens_warning
from tests.support.sessions import Agent, eventually, pending_items, query, settled
from tests.system.test_readme_commands import Terminal

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


# ------------------------------------------------------------------ the card, as text

@pytest.mark.parametrize("later, shown", [
    (timedelta(hours=23, minutes=59), "in 23 h"),
    (timedelta(minutes=5, seconds=30), "in 5 min"),
    (timedelta(seconds=42), "in 42 s"),
    (timedelta(days=3, hours=1), "in 3 d"),
    (timedelta(hours=47), "in 47 h"),
    (timedelta(seconds=0), "overdue"),
    (-timedelta(hours=2), "overdue"),
])
def test_a_deadline_reads_as_relative_time(later: timedelta, shown: str) -> None:
    assert relative_deadline(NOW + later, NOW) == shown
    assert relative_deadline((NOW + later).isoformat().replace("+00:00", "Z"), NOW) == shown


def test_the_card_says_who_asked_why_and_until_when() -> None:
    item = {
        "call_id": "call_1", "kind": "approval", "tool": "delete_file", "args": {"path": "notes.txt"},
        "requested_by": "ana", "verified": True, "led_by": "please delete notes.txt",
        "model_text": "I will delete it now.", "description": "Delete a file in the workspace.",
        "destructive": True, "because": "operator policy tools.delete_file: approval always",
        "deadline": (NOW + timedelta(hours=23, minutes=30)).isoformat(),
    }
    card = describe_item(item, NOW)
    assert card.splitlines()[0] == '⚠ delete_file(path="notes.txt") needs approval  call_id=call_1'
    assert "asked by ana (verified) · due in 23 h" in card
    assert "their message: please delete notes.txt" in card
    assert "the model said: I will delete it now." in card
    assert "the tool: Delete a file in the workspace.  [DESTRUCTIVE]" in card
    assert "needs a person: operator policy tools.delete_file: approval always" in card
    assert "asked by bob (asserted)" in describe_item({**item, "requested_by": "bob", "verified": False}, NOW)
    assert "asked by someone unnamed (asserted)" in describe_item({**item, "requested_by": None, "verified": None}, NOW)


def test_a_form_question_shows_each_fields_type() -> None:
    item = {"call_id": "q1", "kind": "question", "tool": "ask_user_question", "args": {},
            "question": "On what date do you want to fly?",
            "fields": [{"name": "date", "type": "date", "description": "YYYY-MM-DD"},
                       {"name": "seats", "type": "integer", "required": False}]}
    card = describe_item(item, NOW)
    assert "field date (date, YYYY-MM-DD)" in card and "field seats (integer, optional)" in card


def test_an_edit_is_shown_as_a_diff_against_the_models_arguments() -> None:
    model = {"to": "ana@example.com", "subject": "lunch", "body": "see you at noon"}
    edited = {"to": "ana@example.com", "subject": "lunch", "body": "see you at one"}
    assert args_diff(model, edited) == ['body: "see you at noon" -> "see you at one"']
    assert args_diff(model, model) == []


def test_the_inbox_has_column_headers_and_says_verified_or_asserted() -> None:
    def row(session: str, verified: bool) -> InboxItem:
        return InboxItem(session_id=session, call_id="call_1", kind="approval", tool="delete_file",
                         args={"path": "notes.txt"}, args_sha256="", requested_at=NOW - timedelta(minutes=3), age_seconds=180,
                         requested_by="ana", verified=verified, deadline=NOW + timedelta(hours=23, minutes=57))
    inbox = Inbox(items=[row("web-1", True), row("cli-1", False)], waiting_sessions=2, sessions=2, complete=True, read_at=NOW)
    header, first, second = render_inbox(inbox).splitlines()
    assert header.split() == ["WAITING", "SESSION", "CALL", "KIND", "ASKED", "BY", "DUE", "WHAT"]
    assert first.split() == ["3m", "web-1", "call_1", "approval", "ana", "(verified)", "in", "23", "h", 'delete_file(path="notes.txt")']
    assert "ana (asserted)" in second
    assert header.index("SESSION") == first.index("web-1") and header.index("WHAT") == first.index("delete_file")


@pytest.mark.parametrize("typed, decision", [
    ("a", "approve"), (" Approve ", "approve"), ("E", "edit"), ("edit", "edit"), ("r", "reject"), ("REJECT", "reject"),
    ("are you sure the time is right?", None), ("ahead", None), ("yes", None), ("rejected?", None), ("", None),
    ("approve it", None),
])
def test_only_an_unambiguous_choice_is_a_decision(typed: str, decision: str | None) -> None:
    assert decision_of(typed) == decision


def test_chat_commands_are_told_apart_from_messages() -> None:
    assert is_command("/help") and is_command("/cancel")
    assert not is_command("/tmp/notes.txt is the file") and not is_command("delete /help")


# ------------------------------------------------------------------ what is wrong at start

def test_what_is_wrong_at_start_is_said_in_one_line(tmp_path: Path) -> None:
    warning = model_warning({"OPENAI_BASE_URL": "http://localhost:11434/v1"})
    assert warning and "OPENAI_API_KEY is not" in warning and "offline model" in warning and "\n" not in warning
    assert model_warning({"OPENAI_BASE_URL": "http://x/v1", "OPENAI_API_KEY": "none"}) is None
    assert model_warning({}) is None
    assert "HITL_API_TOKENS is not set" in (tokens_warning({}) or "")
    assert tokens_warning({"HITL_API_TOKENS": "tokens.json"}) is None

    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        problem = port_problem("127.0.0.1", port)
    assert problem and f"127.0.0.1:{port} is already in use" in problem and "HITL_API_PORT" in problem


async def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(ROOT / "starter.py"), "serve", cwd=tmp_path,
            env={**os.environ, "HITL_API_PORT": str(port), "HITL_API_TOKENS": ""},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1
    assert err.decode().strip().splitlines() == [
        f"error: 127.0.0.1:{port} is already in use (another `starter.py serve`?); "
        "choose another port with HITL_API_PORT or --port"], err.decode()


# ------------------------------------------------------------------ the offline model asks a typed date

async def test_the_flight_date_is_a_typed_field_so_next_friday_is_refused(agent: Agent) -> None:
    session = await agent.start("book me a flight from Shanghai to Beijing")
    [item] = await eventually(lambda: query(session, "pending"), lambda items: len(items) == 1)
    assert item["question"] == DATE_QUESTION
    assert [(f["name"], f["type"]) for f in item["fields"]] == [("date", "date")]
    for answer in ("next friday", {"date": "next friday"}):
        with pytest.raises(WorkflowUpdateFailedError):
            await session.execute_update("answer_update", {"answer": answer, "by": "ana"})
    await session.execute_update("answer_update", {"answer": {"date": "2026-12-24"}, "by": "ana"})
    [approval] = await eventually(lambda: pending_items(session), lambda items: bool(items) and items[0]["kind"] == "approval")
    assert approval["args"] == {"origin": "Shanghai", "destination": "Beijing", "date": "2026-12-24"}


# ------------------------------------------------------------------ the chat, on a real terminal

def chat_terminal(agent: Agent, session_id: str, term: str = "dumb") -> Terminal:
    env = {**os.environ, "TEMPORAL_ADDRESS": agent.client.service_client.config.target_host,
           "HITL_TASK_QUEUE": agent.task_queue, "TERM": term}
    return Terminal([sys.executable, str(ROOT / "starter.py"), "chat", "--session", session_id], ROOT, env)


async def test_a_question_typed_at_the_decision_prompt_does_not_approve(agent: Agent) -> None:
    terminal = chat_terminal(agent, "pty-1")
    try:
        await asyncio.to_thread(terminal.read_until, "You: ", 60)
        terminal.type("/help\n")  # a command for the chat, never a message for the model
        await asyncio.to_thread(terminal.read_until, "/cancel  end the session", 30)
        terminal.type("please delete notes.txt\n")
        screen = await asyncio.to_thread(terminal.read_until, "[a]pprove / [e]dit / [r]eject", 60)
        assert '⚠ delete_file(path="notes.txt") needs approval' in screen and "asked by you (asserted)" in screen, screen

        mark = len(terminal.screen)
        terminal.type("are you sure the time is right?\n")
        screen = (await asyncio.to_thread(terminal.read_until, "[y/N]", 30))[mark:]
        assert "that is not a decision" in screen and "send it to the agent as a new message instead?" in screen, screen
        terminal.type("n\n")
        await asyncio.to_thread(terminal.read_until, "(not sent; the call still waits", 30)
        handle = agent.client.get_workflow_handle("pty-1")
        [item] = await pending_items(handle)
        assert item["tool"] == "delete_file" and (agent.workspace / "notes.txt").exists()

        terminal.type("  APPROVE \n")
        await asyncio.to_thread(terminal.read_until, "Agent: Deleted notes.txt.", 60)
        assert not (agent.workspace / "notes.txt").exists()
        transcript = await query(handle, "transcript")
        assert [m["content"] for m in transcript if m["role"] == "user"] == ["please delete notes.txt"]
        terminal.type("\x04")
        assert await asyncio.to_thread(terminal.exit_status, 30) == 0
    finally:
        terminal.kill()


async def test_text_at_the_decision_prompt_is_sent_only_when_the_person_says_so(agent: Agent) -> None:
    (agent.workspace / "menu.txt").write_text("lunch\n")
    terminal = chat_terminal(agent, "pty-2")
    try:
        await asyncio.to_thread(terminal.read_until, "You: ", 60)
        terminal.type("please delete notes.txt\n")
        await asyncio.to_thread(terminal.read_until, "[a]pprove / [e]dit / [r]eject", 60)
        terminal.type("actually, delete menu.txt\n")
        await asyncio.to_thread(terminal.read_until, "[y/N]", 30)
        terminal.type("y\n")
        screen = await asyncio.to_thread(terminal.read_until, 'delete_file(path="menu.txt") needs approval', 60)
        assert "moved on" in screen or "The user moved on" in screen or "menu.txt" in screen
        handle = agent.client.get_workflow_handle("pty-2")
        audit = await query(handle, "audit")
        assert not any(event["event"] == "approved" for event in audit), audit
        assert (agent.workspace / "notes.txt").exists()
        terminal.type("\x04")
        assert await asyncio.to_thread(terminal.exit_status, 30) == 0
    finally:
        terminal.kill()


async def test_an_edit_in_the_chat_shows_the_diff_and_asks_before_approving(agent: Agent) -> None:
    (agent.workspace / "old.txt").write_text("delete me\n")
    terminal = chat_terminal(agent, "pty-3")
    try:
        await asyncio.to_thread(terminal.read_until, "You: ", 60)
        terminal.type("please delete notes.txt\n")
        await asyncio.to_thread(terminal.read_until, "[a]pprove / [e]dit / [r]eject", 60)
        terminal.type("e\n")
        await asyncio.to_thread(terminal.read_until, "path [notes.txt]: ", 30)
        terminal.type("old.txt\n")
        screen = await asyncio.to_thread(terminal.read_until, "approve with these edits? [y/N]", 30)
        assert 'path: "notes.txt" -> "old.txt"' in screen, screen
        assert (agent.workspace / "old.txt").exists(), "nothing runs before the edit is confirmed"
        terminal.type("y\n")
        await asyncio.to_thread(terminal.read_until, "Agent: Deleted old.txt.", 60)
        assert (agent.workspace / "notes.txt").exists() and not (agent.workspace / "old.txt").exists()
        terminal.type("\x04")
        assert await asyncio.to_thread(terminal.exit_status, 30) == 0
    finally:
        terminal.kill()


async def test_the_chat_on_a_closed_session_says_so_and_its_session_has_a_summary(agent: Agent) -> None:
    earlier = await agent.start("please delete notes.txt", session_id="pty-4")
    await earlier.execute_update("cancel_update", {"reason": "done"})
    await earlier.result()
    terminal = chat_terminal(agent, "pty-4")
    try:
        screen = await asyncio.to_thread(terminal.read_until, "You: ", 60)
        assert "(session pty-4 has ended (completed); your first message starts a new session" in screen, screen
        terminal.type("please delete notes.txt\n")
        await asyncio.to_thread(terminal.read_until, "[a]pprove / [e]dit / [r]eject", 60)
        description = await agent.client.get_workflow_handle("pty-4").describe()
        assert await description.static_summary() == "Agent session by you: please delete notes.txt"
        details = await description.static_details() or ""
        assert "started with `starter.py chat` by you" in details and "python starter.py pending pty-4" in details
        terminal.type("\x04")
        assert await asyncio.to_thread(terminal.exit_status, 30) == 0
    finally:
        terminal.kill()


# ------------------------------------------------------------------ a model endpoint that cannot be reached

def closed_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once it is closed


async def test_an_unreachable_endpoint_is_one_line_in_the_worker_log(env, workspace: Path) -> None:
    import uuid
    task_queue = f"hitl-unreachable-{uuid.uuid4().hex[:6]}"
    environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host, "HITL_TASK_QUEUE": task_queue,
               "OPENAI_API_KEY": "none", "OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1",
               "HITL_WORKSPACE": str(workspace)}
    worker = await asyncio.create_subprocess_exec(sys.executable, str(ROOT / "worker.py"), cwd=ROOT, env=environ,
                                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        session = await env.client.start_workflow("AgentWorkflow", {"message": "hello"}, id=f"down-{uuid.uuid4().hex[:6]}",
                                                  task_queue=task_queue)

        async def attempt() -> int:
            described = await session.describe()
            return max((a.attempt for a in described.raw_description.pending_activities), default=0)

        await eventually(attempt, lambda n: n >= 3, timeout=60)
    finally:
        worker.terminate()
        log = (await asyncio.wait_for(worker.communicate(), 30))[0].decode()
    assert "Traceback" not in log, log
    failures = [line for line in log.splitlines() if session.id in line]
    assert failures == [f"call_model for session {session.id} failed (attempt 1): model endpoint "
                        "unreachable: Connection error.; Temporal retries it until it answers"], log


async def test_an_unreachable_endpoint_is_one_line_in_the_chat(env, workspace: Path) -> None:
    from activities.openai_backend import OpenAIBackend
    from tests.support.sessions import running_agent

    backend = OpenAIBackend(api_key="none", base_url=f"http://127.0.0.1:{closed_port()}/v1", default_model="m")
    async for agent in running_agent(env.client, workspace, backend):
        terminal = chat_terminal(agent, "down-chat", term="xterm-256color")  # a terminal that draws the spinner
        try:
            await asyncio.to_thread(terminal.read_until, "You: ", 60)
            terminal.type("hello\n")
            screen = await asyncio.to_thread(terminal.read_until, "retrying (attempt 3)", 60)
            assert screen.count("(the model call failed: ") == 1, screen
            assert "model endpoint unreachable" in screen and "Traceback" not in screen, screen
        finally:
            terminal.kill()
        await agent.client.get_workflow_handle("down-chat").terminate("test over")


async def test_serve_without_tokens_says_so_in_one_line(tmp_path: Path) -> None:
    from hitl.devserver import free_port

    environ = {k: v for k, v in os.environ.items() if k != "HITL_API_TOKENS"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "starter.py"), "serve", "--port", str(free_port()), cwd=tmp_path,
        env={**environ, "HITL_KEYS_DIR": str(tmp_path / "keys")}, stderr=asyncio.subprocess.PIPE)
    try:
        assert process.stderr is not None
        first = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
    finally:
        process.terminate()
        await process.wait()
    assert first.startswith("warning: HITL_API_TOKENS is not set, so nobody can sign in"), first


async def test_a_worker_with_an_endpoint_but_no_key_says_it_uses_the_offline_model(env, workspace: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    environ.update(TEMPORAL_ADDRESS=env.client.service_client.config.target_host, HITL_WORKSPACE=str(workspace),
                   OPENAI_BASE_URL="http://localhost:11434/v1", HITL_TASK_QUEUE="hitl-no-key")
    worker = await asyncio.create_subprocess_exec(sys.executable, str(ROOT / "worker.py"), cwd=ROOT, env=environ,
                                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        assert worker.stdout is not None
        lines: list[str] = []
        while not (any("OPENAI_API_KEY is not" in line for line in lines)
                   and any(line.startswith("worker: model: ") for line in lines)):
            line = (await asyncio.wait_for(worker.stdout.readline(), 60)).decode()
            assert line, lines
            lines.append(line)
    finally:
        worker.terminate()
        await worker.wait()
    assert "worker: model: the built-in offline model" in "".join(lines)
    assert any(line.startswith("worker: warning: OPENAI_BASE_URL is set (http://localhost:11434/v1) but OPENAI_API_KEY is not")
               for line in lines), lines


async def test_a_session_started_with_starter_has_a_summary_and_details_to_act_on(agent: Agent) -> None:
    environ = {**os.environ, "TEMPORAL_ADDRESS": agent.client.service_client.config.target_host,
               "HITL_TASK_QUEUE": agent.task_queue}
    started = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "starter.py"), "start", "please delete notes.txt", "--session", "summary-1",
        "--by", "ana", env=environ, stdout=asyncio.subprocess.PIPE)
    assert (await started.communicate())[0].decode().strip() == "started session summary-1"
    description = await agent.client.get_workflow_handle("summary-1").describe()
    assert await description.static_summary() == "Agent session by ana: please delete notes.txt"
    details = await description.static_details() or ""
    for line in ("started with `starter.py start` by ana", "python starter.py pending summary-1",
                 "python starter.py chat --session summary-1", "python starter.py inbox"):
        assert line in details, details
