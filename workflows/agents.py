"""Sub-agents: the agents a session may hand a task to, and what a child session starts with (pure).

An agent is declared by the operator (`HITL_AGENTS`, a JSON file) or in a session's input
(`agents`), with the same shape. The model sees one tool per agent, `delegate__<name>(task)`;
a call starts a child AgentWorkflow (workflows/delegating.py) whose input `child_input` builds:
the agent's instructions, tools, model and step budget, and the root's rules whole. An agent's
declaration can only add to those rules (`require_approval`): it has no field that could waive
approval or widen who decides, so a declaration that tries is refused by its shape.
"""

from __future__ import annotations

import json
import os
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from workflows.forms import describe_validation_error
from workflows.limits import MAX_RULE_ENTRIES, Name, Text

DELEGATE_PREFIX = "delegate__"
# How deep delegation may nest: a child at this depth is offered no delegate tool, so an agent
# that lists itself among its tools ends instead of starting children for ever.
MAX_DEPTH = 4
AGENTS_KEPT = 50


class AgentSpec(BaseModel):
    """One agent, as HITL_AGENTS or a session's `agents` declares it."""

    model_config = ConfigDict(extra="forbid")

    instructions: Text
    tools: Annotated[list[Name], Field(max_length=1000)] = Field(default_factory=list)  # names or globs
    model: Name | None = None
    max_steps: int = Field(default=20, ge=1, le=1000)
    # More approval than the root asks for, never less: the only rule an agent may bring.
    require_approval: Annotated[list[Name], Field(max_length=MAX_RULE_ENTRIES)] = Field(default_factory=list)


# A tool name's characters (what model APIs accept in a function's name), and a workflow id's part.
AgentName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,40}$")]
Agents = Annotated[dict[AgentName, AgentSpec], Field(max_length=AGENTS_KEPT)]


class Delegation(BaseModel):
    """Set on a child session by its parent only: where it sits in the tree (workflows/delegating.py)."""

    model_config = ConfigDict(extra="forbid")

    parent: Name  # the parent session's id; the child refuses to start unless Temporal says so too
    root: Name
    path: Annotated[list[AgentName], Field(min_length=1, max_length=MAX_DEPTH)]  # agent names, root's child first
    # Who asked for the task: the parent's speaker when it delegated (None: nobody named). Set,
    # it is the child's first requester instead of its `by` (the root's owner), so four-eyes and
    # remembered approvals judge a child's calls as the parent's own. Unset on children of older runs.
    asked_by: Name | None = None

    def requester(self, owner: str | None) -> str | None:
        return self.asked_by if "asked_by" in self.model_fields_set else owner


# A child's report lists at most this many open calls (its own and its children's), newest first kept.
REPORTED_KEPT = 50


class ChildPauses(BaseModel):
    """What a child session tells its parent whenever what waits in it (or below it) changes: every
    open call, each with its `path` of agents, its `session_id` and a `call_id` unique in the tree
    (`<session id>/<call id>`), the call's own id in its session as `child_call_id`. `seq` counts a
    child's reports, so one overtaken by a newer is ignored. `decided` passes its decisions up."""

    model_config = ConfigDict(extra="forbid")

    session_id: Name
    seq: int = Field(ge=0)
    items: Annotated[list[dict[str, Any]], Field(max_length=REPORTED_KEPT)]
    # The decisions made in the child or below since its last report: audit events naming their
    # session and path, the call as the root lists it (`<session id>/<call id>`).
    decided: Annotated[list[dict[str, Any]], Field(max_length=REPORTED_KEPT)] = Field(default_factory=list)


class ForwardedToChild(Exception):
    """A decision sent to this session about a call that waits in a child session (or below)."""

    def __init__(self, child: str, call_id: str) -> None:
        super().__init__(child, call_id)
        self.child, self.call_id = child, call_id


class AgentsError(ValueError):
    """HITL_AGENTS is missing, unreadable or malformed; the worker refuses to start."""


def delegate_tool(agent: str) -> str:
    return f"{DELEGATE_PREFIX}{agent}"


def agent_of(tool: str) -> str | None:
    return tool[len(DELEGATE_PREFIX):] if tool.startswith(DELEGATE_PREFIX) else None


def offered_agents(agents: dict[str, AgentSpec], tools: list[str] | None, depth: int) -> list[str]:
    """The agents a session may delegate to: every one when it names no tools, else those whose
    `delegate__<name>` its tools name (globs too); none past MAX_DEPTH."""
    if depth >= MAX_DEPTH:
        return []
    return sorted(name for name in agents
                  if tools is None or any(fnmatchcase(delegate_tool(name), entry) for entry in tools))


def merged(operator: dict[str, AgentSpec], session: dict[str, AgentSpec] | None) -> dict[str, AgentSpec]:
    """The operator's agents and the session's; a session may add agents, not redefine the operator's."""
    clash = sorted(set(operator) & set(session or {}))
    if clash:
        raise ValueError(f"agents: {', '.join(map(repr, clash))} declared in HITL_AGENTS; a session may add "
                         "agents, not redefine the operator's")
    return {**operator, **(session or {})}


# The root's fields a child takes as they are: who owns and sees it, who decides and how, the clocks.
INHERITED = (
    "by", "participants", "approvers", "required_approvals", "four_eyes", "auto_approve", "require_approval",
    "remind_after_seconds", "escalate_after_seconds", "escalate_to", "verified_decisions",
    "approval_timeout_seconds", "answer_timeout_seconds", "continue_as_new_after_events",
)


def child_input(parent: dict[str, Any], agents: dict[str, AgentSpec], name: str, task: str,
                delegation: Delegation, system_prompt: str) -> dict[str, Any]:
    """A child session's start input: the parent's rules whole, the agent's own work, and the
    agent's extra require_approval on top (parent's first, so nothing of the parent's is lost)."""
    agent = agents[name]
    inherited = {key: parent[key] for key in INHERITED if parent.get(key) is not None}
    required = [*inherited.get("require_approval", []), *(entry for entry in agent.require_approval
                                                          if entry not in inherited.get("require_approval", []))]
    return {
        **inherited, "require_approval": required,
        "message": task, "system_prompt": f"{system_prompt}\n\n{agent.instructions}",
        "tools": agent.tools, "model": agent.model or parent.get("model"), "max_steps": agent.max_steps,
        "agents": {key: spec.model_dump(exclude_defaults=True) for key, spec in agents.items()},
        "delegated": delegation.model_dump(exclude_unset=True),
    }


def parse_agents(text: str, source: str = "HITL_AGENTS") -> dict[str, AgentSpec]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise AgentsError(f"{source}: not JSON: {error}") from None
    try:
        return AgentsFile.model_validate({"agents": raw}).agents
    except ValidationError as error:
        raise AgentsError(f"{source}: {describe_validation_error(error)}") from None


class AgentsFile(BaseModel):
    agents: Agents


def agents_from_env(environ: dict[str, str] | None = None) -> dict[str, AgentSpec]:
    """The agents `HITL_AGENTS` names, read now; none without the variable."""
    path = (environ if environ is not None else os.environ).get("HITL_AGENTS", "").strip()
    if not path:
        return {}
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise AgentsError(f"HITL_AGENTS={path}: cannot read it: {error.strerror or error}") from None
    return parse_agents(text, f"HITL_AGENTS={path}")
