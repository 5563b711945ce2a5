"""The tool activity: run one catalog tool (built-in, user or MCP) with validated arguments."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.conversation_cache import CACHE
from activities.mcp.elicitation import InputRequired
from activities.model import final_on_attempt, heartbeating
from activities.tools import ToolError
from hitl.catalog.bounded_regexes import regex_time_limit
from hitl.catalog import CATALOG, ArgumentsRejected, ToolCatalog, ToolContext
from workflows.contract import RUN_TOOL
from workflows.server_questions import INPUT_REQUIRED
from workflows.forms import describe_validation_error
from workflows.limits import well_formed
from workflows.requests import ToolInvocation


MAX_RESULT_BYTES = 64_000  # UTF-8 bytes: Temporal counts bytes, and 64,000 CJK characters are 192 KB
TOOL_ATTEMPTS = 3


class ToolActivities:
    def __init__(self, workspace: Path, catalog: ToolCatalog = CATALOG) -> None:
        self.workspace = workspace.resolve()
        self.catalog = catalog

    @activity.defn(name=RUN_TOOL.name)
    async def run_tool(self, invocation: ToolInvocation) -> str:
        """A ToolError is the tool's answer to the model, so it is not retried;
        anything else may be transient and goes to Temporal's retry policy."""
        try:
            async with heartbeating():
                with regex_time_limit():  # the schema's regexes, checked twice (check, run): one budget
                    output = await self._run(invocation)
            CACHE.remember_tool_output(invocation.session_id, invocation.call_id, output)  # the next model call's
            return output
        except InputRequired as asked:  # the workflow asks a person, then calls again (workflows/tool_input.py)
            raise ApplicationError(within_limit(str(asked)), asked.question, type=INPUT_REQUIRED, non_retryable=True) from None
        except ToolError as error:
            # Bounded like a result: the model reads it, and history stores it.
            raise ApplicationError(within_limit(str(error)), type="ToolError", non_retryable=True) from None
        except Exception as error:  # noqa: BLE001 (counted: the workflow's policy has no attempt limit)
            # `from None`: on early attempts this re-raises `error` itself, and
            # `raise error from error` would make it its own cause, a loop the
            # failure converter recurses into.
            raise final_on_attempt(error, TOOL_ATTEMPTS) from None

    async def _run(self, invocation: ToolInvocation) -> str:
        spec = self.catalog.get(invocation.tool)
        if spec is None or not spec.runnable:
            raise ToolError(f"no runnable tool named {invocation.tool!r} on this worker")
        try:
            spec.check(invocation.args)
        except ValidationError as error:
            raise ToolError(f"invalid arguments: {describe_validation_error(error)}") from None
        except ArgumentsRejected as error:
            raise ToolError(f"invalid arguments: {error}") from None
        context = ToolContext(session_id=invocation.session_id, call_id=invocation.call_id, workspace=self.workspace,
                              tool_input=invocation.input)
        try:
            output = await spec.run(invocation.args, context)
        except ArgumentsRejected as error:  # a schema tool checks again, on what is left of the budget
            raise ToolError(f"invalid arguments: {error}") from None
        return within_limit(output)


def within_limit(text: str) -> str:
    """A model cannot read megabytes, and Temporal refuses payloads over 2 MB.

    At most MAX_RESULT_BYTES in UTF-8, the note included, cut on a character boundary, and
    well-formed: a file name that is not UTF-8 comes back from the OS with lone surrogates,
    which no payload can hold (workflows/limits.py)."""
    text = well_formed(text)
    encoded = text.encode("utf-8")
    if len(encoded) <= MAX_RESULT_BYTES:
        return text
    room = MAX_RESULT_BYTES - len(f"\n[... {len(encoded)} more bytes cut]".encode("utf-8"))
    kept = encoded[:room].decode("utf-8", errors="ignore")
    return f"{kept}\n[... {len(encoded) - len(kept.encode('utf-8'))} more bytes cut]"
