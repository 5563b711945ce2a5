"""The tool a session offers for each agent it may delegate to: `delegate__<name>(task)`
(named by workflows/agents.py).

Not in the catalog: which agents a session has is its own (its input and the operator's
HITL_AGENTS, learnt as it starts), so the spec is made per session, by the model's tool list
(workflows/views.py) and by the worker's judgement of each call (activities/model.py) alike.
It has no function: the workflow runs it as a child session (workflows/delegating.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hitl.catalog.specs import ToolSpec


class DelegatedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, description="What the agent should do, in full: it sees nothing else of this conversation")


class DelegateSpec(ToolSpec):
    """Its schema is recorded with each call, so a person's edit of the task is checked against it
    (workflows/pauses.py) though the catalog does not hold it; its definition is never pinned: an
    operator's new instructions for an agent are no changed tool."""

    def recorded_schema(self) -> dict[str, Any] | None:
        return self.parameters()

    def definition_sha256(self) -> str | None:
        return None


def delegate_spec(tool: str, agent: str, instructions: str = "") -> ToolSpec:
    """`tool` is the name workflows/agents.py gives the agent's tool (delegate_tool)."""
    about = " ".join(instructions.split())[:300]
    return DelegateSpec(name=tool, arguments=DelegatedTask, function=None,
                    description=f"Hand a task to the {agent} agent and get its final answer. {about}".strip())
