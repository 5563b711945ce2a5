"""A tool's server asking a person (MCP 2026-07-28 input_required), as a question pause of the session.

The tool activity ends with what the server asks (activities/mcp/elicitation.py,
an ApplicationError of type INPUT_REQUIRED); the run opens a question pause
named `<call id>~input<round>`, waits for it like any pause (across worker
restarts), and calls the tool again with the answer: accept with the form's
content (or "done" for a URL), decline on a reject, cancel when nobody
answered. The retried call's result is the tool's result.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.agent_parts import AgentParts
from workflows.limits import clip
from workflows.patches import TOOL_INPUT_AS_A_PAUSE
from workflows.planning import PlannedCall

INPUT_REQUIRED = "InputRequired"
MAX_ROUNDS = 5


class AskedInput(BaseModel):
    """What the server asks, as the activity said it (anyone who reaches the frontend may complete
    an activity, so it is read like any input)."""

    server: str
    key: str
    mode: Literal["form", "url"]
    question: str
    request_state: str | None = None
    fields: list[dict[str, Any]] | None = None
    choices: list[str] | None = None
    url: str | None = None
    domain: str | None = None


def asked_input(error: ActivityError) -> AskedInput | str | None:
    """The question in a tool activity's failure (or why it cannot be read); None for any other failure."""
    cause = error.cause
    if not isinstance(cause, ApplicationError) or cause.type != INPUT_REQUIRED:
        return None
    if not workflow.patched(TOOL_INPUT_AS_A_PAUSE):
        return None
    try:
        return AskedInput.model_validate(cause.details[0] if cause.details else None)
    except (ValidationError, TypeError, ValueError) as problem:
        return clip(f"its question could not be read ({problem})", 500)


QUESTION_MARK = "~input"  # a server's question pause is `<call id>~input<round>`


def call_of_question(pause_id: str) -> str:
    """The call a server's question pause belongs to. Its round is cut at the last mark: the model
    names its calls, and a call id may hold the mark itself."""
    return pause_id.rsplit(QUESTION_MARK, 1)[0]


class ToolInput(AgentParts):
    """Mixed into AgentWorkflow: the pause for a server's question, and the answered call."""

    async def answer_tool_input(self, call_id: str, tool: str, args: dict[str, Any], asked: AskedInput,
                                round_: int) -> tuple[dict[str, Any] | None, str | None]:
        """Ask a person; the retried call's input, or the text the model reads when it is not retried."""
        if round_ > MAX_ROUNDS:
            return None, f"Error: {tool} failed: its MCP server asked for input more than {MAX_ROUNDS} times"
        pause_id = f"{call_id}{QUESTION_MARK}{round_}"
        plan = PlannedCall(call_id=pause_id, tool=tool, action="ask", args=args)
        self.request_person("question", plan, asked=asked)
        self.session.tool_inputs_waiting += 1
        try:
            await self.wait_for_people()
        finally:
            self.session.tool_inputs_waiting -= 1
        settlement = self.session.run_state.pauses.collect(pause_id)
        action = {"answered": "accept", "declined": "decline"}.get(settlement.outcome, "cancel")
        content = settlement.answer if action == "accept" and asked.mode == "form" else None
        return {"key": asked.key, "request_state": asked.request_state, "action": action, "content": content,
                "round": round_}, None
