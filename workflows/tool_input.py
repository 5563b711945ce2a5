"""A tool's server asking a person (MCP 2026-07-28 input_required), as a question pause of the session.

The tool activity ends with what the server asks (activities/mcp/elicitation.py,
an ApplicationError of type INPUT_REQUIRED); the run opens a question pause
named `<call id>~input<round>`, waits for it like any pause (across worker
restarts), and calls the tool again with the answer: accept with the form's
content (or "done" for a URL), decline on a reject, cancel when nobody
answered. The retried call's result is the tool's result.
"""

from __future__ import annotations

from typing import Any

from workflows.planning import PlannedCall
from workflows.server_questions import MAX_ROUNDS, QUESTION_MARK, AskedInput
from workflows.session_run import SessionRun
from workflows.waiting import Waiting

class ToolInput:
    """A part of AgentWorkflow: the pause for a server's question, and the answered call."""

    def __init__(self, session: SessionRun, waiting: Waiting) -> None:
        self.session = session
        self.waiting = waiting

    async def answer_tool_input(self, call_id: str, tool: str, args: dict[str, Any], asked: AskedInput,
                                round_: int) -> tuple[dict[str, Any] | None, str | None]:
        """Ask a person; the retried call's input, or the text the model reads when it is not retried."""
        if round_ > MAX_ROUNDS:
            return None, f"Error: {tool} failed: its MCP server asked for input more than {MAX_ROUNDS} times"
        pause_id = f"{call_id}{QUESTION_MARK}{round_}"
        plan = PlannedCall(call_id=pause_id, tool=tool, action="ask", args=args)
        self.waiting.request_person("question", plan, asked=asked)
        self.session.tool_inputs_waiting += 1
        try:
            await self.waiting.wait_for_people()
        finally:
            self.session.tool_inputs_waiting -= 1
        settlement = self.session.run_state.pauses.collect(pause_id)
        action = {"answered": "accept", "declined": "decline"}.get(settlement.outcome, "cancel")
        content = settlement.answer if action == "accept" and asked.mode == "form" else None
        return {"key": asked.key, "request_state": asked.request_state, "action": action, "content": content,
                "round": round_}, None
