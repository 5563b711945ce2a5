"""Real clients: the `temporal` CLI alone, and `python starter.py`, against a running worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from hitl.devserver import temporal_binary
from tests.support.sessions import Agent, eventually, settled

ROOT = Path(__file__).resolve().parents[2]


def address(agent: Agent) -> str:
    return agent.client.service_client.config.target_host


async def temporal(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    command = [temporal_binary(), *args, "--address", address(agent), "--output", "json"]
    return await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60)


async def starter(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEMPORAL_ADDRESS": address(agent), "HITL_TASK_QUEUE": agent.task_queue}
    command = [sys.executable, str(ROOT / "starter.py"), *args]
    return await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


def query_result(completed: subprocess.CompletedProcess[str]) -> Any:
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["queryResult"][0]


async def test_the_temporal_cli_alone_drives_a_session(agent: Agent) -> None:
    started = await temporal(
        agent, "workflow", "start", "--type", "AgentWorkflow", "--task-queue", agent.task_queue,
        "--workflow-id", "cli-1", "--input", '{"message": "please delete notes.txt"}',
    )
    assert started.returncode == 0, started.stderr

    async def pending() -> list[dict[str, Any]]:
        return query_result(await temporal(agent, "workflow", "query", "--workflow-id", "cli-1", "--name", "pending"))

    [item] = await eventually(pending, lambda items: bool(items) and len(items) == 1)
    assert item["tool"] == "delete_file" and item["args"] == {"path": "notes.txt"}

    refused = await temporal(agent, "workflow", "update", "execute", "--workflow-id", "cli-1",
                             "--name", "approve_update", "--input", '{"call_id": "nope"}')
    assert refused.returncode != 0 and "unknown call_id 'nope'" in refused.stderr + refused.stdout

    signalled = await temporal(agent, "workflow", "signal", "--workflow-id", "cli-1", "--name", "approve",
                               "--input", '{"by": "cli-user"}')
    assert signalled.returncode == 0, signalled.stderr

    async def status() -> dict[str, Any]:
        return query_result(await temporal(agent, "workflow", "query", "--workflow-id", "cli-1", "--name", "status"))

    final = await eventually(status, lambda s: s["state"] == "idle")
    assert final["last_answer"] == "Deleted notes.txt."
    assert not (agent.workspace / "notes.txt").exists()


async def test_starter_commands_cover_a_whole_session(agent: Agent) -> None:
    started = await starter(agent, "--json", "start", "book me a flight to Beijing on 2026-12-24", "--session", "cli-2")
    assert json.loads(started.stdout) == {"session_id": "cli-2"}, started.stderr

    async def pending() -> list[dict[str, Any]]:
        return json.loads((await starter(agent, "--json", "pending", "cli-2")).stdout)

    [question] = await eventually(pending, lambda items: bool(items) and len(items) == 1)
    assert question["question"] == "Which city are you departing from?"
    answered = await starter(agent, "--json", "answer", "cli-2", "Shanghai", "--by", "ana")
    assert json.loads(answered.stdout)["outcome"] == "answered"

    [approval] = await eventually(pending, lambda items: bool(items) and len(items) == 1 and items[0]["kind"] == "approval")
    bad = await starter(agent, "approve", "cli-2", "--args", '{"origin": 42}')
    assert bad.returncode == 2 and "edited args do not fit book_flight" in bad.stderr
    edited = {"origin": "Shanghai", "destination": "Beijing", "date": "2026-12-25"}
    approved = await starter(agent, "--json", "approve", "cli-2", "--call", approval["call_id"], "--args", json.dumps(edited))
    assert json.loads(approved.stdout)["outcome"] == "edited", approved.stderr

    status = await settled(agent.client.get_workflow_handle("cli-2"))
    assert "2026-12-25" in status["last_answer"]
    shown = await starter(agent, "status", "cli-2")
    assert "state: idle" in shown.stdout
    transcript = await starter(agent, "transcript", "cli-2")
    assert "You: book me a flight" in transcript.stdout and "→ book_flight" in transcript.stdout

    sent = await starter(agent, "send", "cli-2", "please delete notes.txt")
    assert sent.returncode == 0, sent.stderr
    await eventually(pending, lambda items: bool(items) and len(items) == 1 and items[0]["tool"] == "delete_file")
    rejected = await starter(agent, "reject", "cli-2", "--reason", "keep it")
    assert rejected.returncode == 0, rejected.stderr
    cancelled = await starter(agent, "cancel", "cli-2", "--reason", "done")
    assert cancelled.returncode == 0, cancelled.stderr
    result = await agent.client.get_workflow_handle("cli-2").result()
    assert result["reason"] == "cancelled: done"
    audit = json.loads((await starter(agent, "--json", "audit", "cli-2")).stdout)
    decided = [e for e in audit if e["event"] in ("answered", "edited", "rejected")]
    assert [(e["event"], e["via"]) for e in decided] == [("answered", "cli"), ("edited", "cli"), ("rejected", "cli")]


async def test_the_chat_decides_and_reattaches(agent: Agent) -> None:
    async def chat(*lines: str) -> str:
        env = {**os.environ, "TEMPORAL_ADDRESS": address(agent), "HITL_TASK_QUEUE": agent.task_queue}
        completed = await asyncio.to_thread(
            subprocess.run, [sys.executable, str(ROOT / "starter.py"), "chat", "--session", "chat-1"],
            input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, timeout=60, env=env,
        )
        assert completed.returncode == 0, completed.stderr
        return completed.stdout

    first = await chat("please delete notes.txt", "r", "keep it", "book me a flight to Beijing on 2026-12-24")
    assert "⚠ delete_file(path=\"notes.txt\") needs approval" in first
    assert "Agent: I did not delete notes.txt, as you asked." in first
    assert "? Which city are you departing from?" in first
    assert "left session chat-1" in first  # stdin ended while the question waits

    second = await chat("Shanghai", "e", "", "", "2026-12-25", "y", "/quit")
    assert "reattached to session chat-1" in second
    assert "Agent: Booked flight Shanghai -> Beijing on 2026-12-25" in second
    assert (agent.workspace / "notes.txt").exists()


async def test_the_chat_renders_a_form_field_by_field(openai_agent) -> None:
    from tests.support.fake_openai import text, tool_calls

    agent, fake = openai_agent
    fields = [{"name": "origin", "type": "string", "description": "departure city"},
              {"name": "class", "type": "enum", "choices": ["economy", "business"]}]
    fake.script(tool_calls(("q1", "ask_user_question", {"question": "Trip details?", "fields": fields})), text("thanks"))
    env = {**os.environ, "TEMPORAL_ADDRESS": address(agent), "HITL_TASK_QUEUE": agent.task_queue}
    completed = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(ROOT / "starter.py"), "chat", "--session", "form-1"],
        input="book a trip\nParis\nfirst\n/quit\n", capture_output=True, text=True, timeout=60, env=env,
    )
    assert "? Trip details?" in completed.stdout
    assert "origin (string" in completed.stdout and "class (economy/business)" in completed.stdout
    assert "refused: answer refused: class: 'first' is not one of ['economy', 'business']" in completed.stdout
    [item] = await agent.client.get_workflow_handle("form-1").query("pending")
    assert item["fields"][1]["choices"] == ["economy", "business"]


async def test_starting_an_open_session_again_says_so_without_a_traceback(agent: Agent) -> None:
    first = await starter(agent, "start", "hello", "--session", "cli-again")
    assert first.returncode == 0, first.stderr
    again = await starter(agent, "start", "hello", "--session", "cli-again")
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert "session cli-again already exists and is still open" in again.stderr


async def test_a_decision_no_worker_takes_is_given_up_with_a_reason(agent: Agent) -> None:
    """With no worker, `approve` printed nothing and waited for ever (a newcomer's first hour)."""
    from workflows.agent import AgentWorkflow

    await agent.client.start_workflow(AgentWorkflow.run, {"message": "please delete notes.txt"},
                                      id="cli-no-worker", task_queue="nobody-polls-this-queue")
    env = {**os.environ, "TEMPORAL_ADDRESS": address(agent), "HITL_TASK_QUEUE": "nobody-polls-this-queue",
           "HITL_CLI_WAIT_SECONDS": "4"}
    command = [sys.executable, str(ROOT / "starter.py"), "approve", "cli-no-worker", "--call", "call_1"]
    waited = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert waited.returncode == 1, (waited.stdout, waited.stderr)
    assert "no answer from the session yet" in waited.stderr and "is a worker running" in waited.stderr


def no_worker_line(task_queue: str) -> str:
    return (f"error: no worker polls task queue {task_queue}: start one with `python worker.py` "
            f"(HITL_TASK_QUEUE={task_queue}, and the same TEMPORAL_ADDRESS and namespace)")


async def test_reading_a_session_no_worker_polls_says_so_in_one_line(env: WorkflowEnvironment) -> None:
    """`status` and `pending` with no worker waited for the query's deadline and printed
    `error: Timeout expired` (issue 37): they say at once what to start."""
    from workflows.agent import AgentWorkflow

    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    await env.client.start_workflow(AgentWorkflow.run, {"message": "hello"}, id=f"cli-{queue}", task_queue=queue)
    environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host, "HITL_TASK_QUEUE": queue}
    for command in ("status", "pending", "transcript"):
        read = await asyncio.to_thread(
            subprocess.run, [sys.executable, str(ROOT / "starter.py"), command, f"cli-{queue}"],
            capture_output=True, text=True, timeout=60, env=environ, cwd=ROOT)
        assert read.returncode == 1, (command, read.stdout, read.stderr)
        assert read.stderr.strip().splitlines() == [no_worker_line(queue)], (command, read.stderr)


async def test_the_chat_with_no_worker_says_so_instead_of_waiting(env: WorkflowEnvironment) -> None:
    """The chat sat silent for a minute, then printed `error: Timeout expired`."""
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host, "HITL_TASK_QUEUE": queue}
    chat = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(ROOT / "starter.py"), "chat", "--session", f"chat-{queue}"],
        input="hello\n", capture_output=True, text=True, timeout=60, env=environ, cwd=ROOT)
    assert chat.returncode == 1, (chat.stdout, chat.stderr)
    assert chat.stderr.strip().splitlines() == [no_worker_line(queue)], chat.stderr


async def test_a_call_id_is_taken_where_people_type_it(agent: Agent) -> None:
    """`approve tour-1 call_99` answered `unrecognized arguments` (issue 26): the call id goes after
    the session, as `pending` shows it; a wrong one is the session's refusal, not a usage error."""
    await agent.start("please delete notes.txt", session_id="cli-positional")
    [item] = await eventually(lambda: pending_of(agent, "cli-positional"), lambda items: len(items) == 1)

    wrong = await starter(agent, "approve", "cli-positional", "call_99")
    assert wrong.returncode == 2 and "refused: " in wrong.stderr and "call_99" in wrong.stderr, wrong.stderr
    twice = await starter(agent, "reject", "cli-positional", item["call_id"], "--call", "call_99")
    assert twice.returncode == 2 and twice.stderr.strip().splitlines() == [
        f"starter.py reject: error: two call ids, {item['call_id']} and --call call_99: give one "
        "(`starter.py reject --help` says more)"]
    approved = await starter(agent, "--json", "approve", "cli-positional", item["call_id"])
    assert json.loads(approved.stdout)["outcome"] == "approved", approved.stderr


async def test_an_answer_is_one_argument_and_its_call_is_named_with_call(agent: Agent) -> None:
    """A call id before the answer's text is not guessed at: the error says how to name the question."""
    await agent.start("book me a flight to Beijing", session_id="cli-answer-words")
    [item] = await eventually(lambda: pending_of(agent, "cli-answer-words"), lambda items: len(items) == 1)
    guessed = await starter(agent, "answer", "cli-answer-words", item["call_id"], "Shanghai")
    [line] = guessed.stderr.strip().splitlines()
    assert guessed.returncode == 2 and "unexpected 'Shanghai'" in line and "--call CALL_ID" in line, line
    assert await pending_of(agent, "cli-answer-words") == [item], "nothing was sent"
    answered = await starter(agent, "--json", "answer", "cli-answer-words", "--call", item["call_id"], "Shanghai")
    assert json.loads(answered.stdout)["outcome"] == "answered", answered.stderr


async def pending_of(agent: Agent, session_id: str) -> list[dict[str, Any]]:
    listed = await starter(agent, "--json", "pending", session_id)
    return json.loads(listed.stdout) if listed.returncode == 0 else []
