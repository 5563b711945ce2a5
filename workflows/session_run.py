"""The state of one run of a session: the one object the workflow's parts read and write.

AgentWorkflow (workflows/agent.py) builds it in its `__init__` and hands it to each of its
parts, so every piece of per-run state is declared once, here, with what it means. What
outlives the run is `run_state` (workflows/handover.py): continue-as-new carries it whole;
the rest is this run's alone and starts afresh in the next.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from workflows.conversation import ChatMessage, Conversation, message_sha256
from workflows.handover import RunState
from workflows.patches import Behaviours
from workflows.session import SessionInput, SessionState
from workflows.visibility import Publisher

if TYPE_CHECKING:  # the catalog is passed through the sandbox where it is used (workflows/agent.py)
    from hitl.catalog import ToolSpec
    from workflows.agents import AgentSpec


@dataclass
class SessionRun:
    """Everything a run of the session knows; the parts of AgentWorkflow share it and nothing else."""

    config: SessionInput
    run_state: RunState  # all that continue-as-new carries to the next run
    offered: dict[str, ToolSpec] = field(default_factory=dict)  # the catalog's tools offered as the run started
    setup_error: str | None = None  # why the start input was refused (workflows/starting.py)
    chain: list[str] = field(default_factory=list)  # hash chain over this run's messages
    state: SessionState = "running"
    closed_reason: str | None = None
    notifications_in_flight: int = 0
    notices_in_flight: dict[str, int] = field(default_factory=dict)  # call id -> its notices still being sent
    tool_inputs_waiting: int = 0  # tool calls waiting for a person to answer their MCP server (tool_input.py)
    hand_over_blocked: bool = False  # too much waits for people to hand over now
    handing_over: bool = False
    settled_event: int = 0  # the event id at which the session last stopped running
    waiters: list[int] = field(default_factory=list)  # wait_until_settled calls still waiting, oldest first
    waiters_seen: int = 0
    publisher: Publisher = field(default_factory=Publisher)
    # Which side of each patch this run is on (workflows/patches.py): read at the run's start.
    behaviours: Behaviours = field(default_factory=Behaviours.before_run)
    validating: bool = False  # inside an Update's validator, which may command nothing
    model_called: bool = False  # this run has called the model (its first call may carry its messages: agent.py, reason)
    reusable_runs: dict[str, tuple[dict[str, Any], datetime]] = field(default_factory=dict)  # tool -> (verdict, when)
    # Sub-agents (workflows/delegating.py): this run's agents, and the signals to the rest of the tree.
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    reports_in_flight: int = 0  # signals to other sessions of the tree not yet delivered
    last_report: list[dict[str, Any]] = field(default_factory=list)  # what a child last told its parent waits in it
    last_sent: asyncio.Future[None] | None = None  # the newest of those signals (sent in order)

    @property
    def conversation(self) -> Conversation:
        """The run's messages (kept in run_state), with the conversation's rules (workflows/conversation.py)."""
        return Conversation.model_construct(messages=self.run_state.messages)

    def append(self, message: ChatMessage) -> None:
        self.conversation.append(message)
        self.chain.append(message_sha256(self.chain[-1] if self.chain else "", message))

    def add_tool_result(self, call_id: str, text: str) -> None:
        self.append(self.conversation.tool_result(call_id, text))
        self.run_state.events.add("tool_result", workflow.now(), call_id=call_id,
                                  tool=self.conversation.tool_name_of(call_id), content=text)
