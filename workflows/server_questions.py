"""What a tool's MCP server asks a person (MCP 2026-07-28 input_required), as the tool activity reports it.

The tool activity ends with an ApplicationError of type INPUT_REQUIRED whose details hold the
question (activities/mcp/elicitation.py); the session asks a person in a question pause named
`<call id>~input<round>` (workflows/tool_input.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.limits import clip
from workflows.patches import TOOL_INPUT_AS_A_PAUSE

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
