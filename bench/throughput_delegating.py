"""bench/throughput.py's `delegating` design: the product, each session's turn handed to one sub-agent.

The root's model (tests/support/scripted_model.py, asked "delegate stepper: <task>") calls
`delegate__stepper(task)` once; the child session (workflows/delegating.py, id `<root>/stepper/1`)
makes the tool steps with the same script and tool, and answers; the root's model then answers
with the child's answer. The tool steps are the child's; the events and actions are both sessions'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.support.scripted_model import DELEGATE
from workflows.agents import delegate_tool

if TYPE_CHECKING:
    from bench.throughput import Phase

AGENT = "stepper"
# A child is an AgentWorkflow with a HitlState of its own, started with a parent link: roots have none.
ROOTS_ONLY = "ParentWorkflowId IS NULL"


def root_input(message: str, tool: str, tool_steps: int) -> dict[str, Any]:
    """The root's two model calls (the hand-over, the answer); the agent's `tool_steps` and its answer."""
    return {
        "message": f"{DELEGATE}{AGENT}: {message}", "max_steps": 2, "tools": [delegate_tool(AGENT)],
        "agents": {AGENT: {"instructions": "Make the steps.", "tools": [tool], "max_steps": tool_steps + 1}},
    }


def child_of(session_id: str) -> str:
    """The root's one child session (workflows/delegating.py names it)."""
    return f"{session_id}/{AGENT}/1"


def each_round(phases: list[Phase]) -> list[str]:
    """Each round's delegating figures beside the same round's product figures, and their ratio."""
    pairs = zip([p for p in phases if p.design == "delegating"], [p for p in phases if p.design == "product"])
    lines = []
    for number, (mine, theirs) in enumerate(pairs, 1):
        figures = [*((name, mine.figures[name], theirs.figures[name]) for name in mine.figures),
                   ("wf tasks/step", mine.workflow_tasks, theirs.workflow_tasks)]
        lines.append(f"delegating / product, round {number}: " + ", ".join(
            f"{name} {value:.1f} / {base:.1f}" + (f" (x{value / base:.2f})" if base else "") for name, value, base in figures))
    return lines
