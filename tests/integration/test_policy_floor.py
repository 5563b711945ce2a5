"""What the operator's policy names for a tool is a floor that no session rule waives: not at
start, whatever door the session came in by, and not when a call is judged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError

from tests.integration.test_authorization import write_policy
from tests.integration.test_cli import temporal
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from tests.support.sessions import Agent, pending_items, settled

ONCALL_DECIDES_MAIL = {
    "groups": {"oncall": ["ana", "bob"]},
    "tools": {"send_email": {"approvers": ["@oncall"], "required_approvals": 2, "four_eyes": True, "remember": False}},
}
MAIL = "send an email to team@example.com about lunch saying noon"


def outbox(agent: Agent) -> list[Path]:
    folder = agent.workspace / "outbox"
    return list(folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("door", ["python client", "temporal CLI"])
async def test_auto_approve_of_a_tool_whose_deciders_the_policy_names_is_refused_at_start(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, door: str,
) -> None:
    """eve, outside @oncall, started a session with `auto_approve: ["send_email"]` while the policy
    said @oncall decides mail, two of them, four eyes: the email went out with nobody asked."""
    write_policy(tmp_path, monkeypatch, ONCALL_DECIDES_MAIL)
    session_input: dict[str, Any] = {"message": MAIL, "by": "eve", "auto_approve": ["send_email"]}
    session_id = f"floor-{door.replace(' ', '-')}-{tmp_path.name[-8:]}"
    if door == "python client":
        session = await agent.start(session_id=session_id, **session_input)
    else:
        started = await temporal(agent, "workflow", "start", "--type", "AgentWorkflow", "--task-queue",
                                 agent.task_queue, "--workflow-id", session_id, "--input", json.dumps(session_input))
        assert started.returncode == 0, started.stderr
        session = agent.client.get_workflow_handle(session_id)
    with pytest.raises(WorkflowFailureError) as failure:
        # Refused in its first workflow task; a session that is not refused sends the mail and then
        # waits for its next message: the bound only turns that into a failure.
        await asyncio.wait_for(session.result(), 120)
    message = failure.value.cause.message  # type: ignore[union-attr]
    assert message.startswith("invalid session input: auto_approve: 'send_email' covers send_email"), message
    assert "approvers" in message and outbox(agent) == []


@pytest.mark.parametrize("named", [
    {"approvers": ["ana", "bob"]},
    {"required_approvals": 2, "approvers": ["ana", "bob"]},
    {"four_eyes": True},
    {"remember": False},
])
async def test_a_policy_that_names_who_decides_after_a_session_started_binds_its_next_call(
    openai_agent: tuple[Agent, FakeOpenAI], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: dict[str, Any],
) -> None:
    """A session started with auto_approve of send_email before the operator named who decides
    mail kept sending mail on its own after the policy named them."""
    agent, fake = openai_agent
    policy = write_policy(tmp_path, monkeypatch, {})
    mail = {"to": "team@example.com", "subject": "lunch", "body": "noon"}
    fake.script(tool_calls(("m1", "send_email", mail)), text("sent"), tool_calls(("m2", "send_email", mail)))
    session = await agent.start("mail the team", auto_approve=["send_email"])
    await settled(session)
    assert len(outbox(agent)) == 1, "before the policy named anyone, the session's rule ran it"

    policy.write_text(json.dumps({"tools": {"send_email": named}}))
    await session.signal("user_message", {"text": "and again"})
    [item] = await pending_items(session)
    assert item["tool"] == "send_email" and "auto_approve does not waive it" in item["because"], item
    assert len(outbox(agent)) == 1
