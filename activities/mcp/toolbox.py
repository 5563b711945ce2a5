"""MCP servers' tools in the worker's catalog, as mcp__<server>__<tool>, and how they are called.

The toolbox opens one connection per configured server when the worker
starts, puts each server's tools in the catalog with their JSON schemas and
approval policies, keeps them current when a server's list changes, and takes
them out again when the worker stops.

A call is a tool activity like any other, so a worker that dies is retried by
Temporal, and a server that is down gets the activity's few attempts before
the model reads a clear error. What MCP cannot give is an idempotency key: a
call that reached the server and got no answer (the server or the worker died
mid-call) may or may not have acted. So before a tool that is neither
read-only nor idempotent is sent, a receipt is written in the workspace; an
attempt that finds one does not send the call again but tells the model it
may have happened. The effect happens at most once per approval.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError

from activities.mcp.config import ServerEntry, config_from_env
from activities.mcp.elicitation import InputRequired, question_from, responses_for
from activities.mcp.connection import CallInterrupted, ServerConnection, ServerUnavailable
from activities.mcp.policy import policy_for, policy_trusts
from activities.mcp.sandbox import bwrap_path, bwrap_problem
from activities.mcp.results import as_tool_output, defused, result_text
from activities.tools.errors import ToolError
from activities.tools.receipts import has_receipt, remove_receipt, write_receipt
from hitl.catalog import CATALOG, SchemaToolSpec, ToolCatalog, ToolContext
from hitl.catalog.schema_tools import schema_problem
from workflows.limits import json_size

log = logging.getLogger("hitl.mcp")

PREFIX = "mcp__"
OFFERED_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
READY_WAIT_SECONDS = 10.0  # per attempt, for a server that is restarting
# Every model call of every session that offers MCP tools carries their descriptions and schemas
# (through the `model_context` query, whose answer Temporal caps at a few MB): one server's
# megabyte description failed every model call of every session. Beyond these a tool is skipped.
MAX_TOOL_BYTES = 32_000
MAX_OFFERED_BYTES = 600_000  # all servers' tools together


def offered_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


class McpToolbox:
    def __init__(self, servers: dict[str, ServerEntry], catalog: ToolCatalog = CATALOG) -> None:
        self.catalog = catalog
        self.entries = servers
        self.connections = {name: ServerConnection(name, entry, self.offer) for name, entry in servers.items()}
        self.offered: dict[str, set[str]] = {name: set() for name in servers}
        self.skipped: dict[str, list[str]] = {name: [] for name in servers}
        self.warnings: dict[str, list[str]] = {name: [] for name in servers}
        self.sizes: dict[str, int] = {}  # offered name: bytes of its description and schema

    async def __aenter__(self) -> McpToolbox:
        for name, connection in self.connections.items():
            if not await connection.start():
                log.warning("MCP server %s is not available yet (%s); its tools are offered once it is",
                            name, connection.last_error or "no answer")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for connection in self.connections.values():
            await connection.close()
        for names in self.offered.values():
            for name in names:
                self.catalog.remove(name)

    def describe(self) -> list[str]:
        """One line per server, for the worker's start-up output."""
        lines = []
        for name, connection in self.connections.items():
            state = f"{len(self.offered[name])} tools" if connection.sessions_opened else f"not reachable ({connection.last_error})"
            skipped = f"; skipped {', '.join(self.skipped[name])}" if self.skipped[name] else ""
            entry = self.entries[name]
            trust = "trusted" if entry.trusted else "trusted by the operator's policy" if policy_trusts(name) else "untrusted"
            where = "" if entry.command is None else (", not sandboxed" if name in self.unsandboxed() else ", sandboxed")
            lines.append(f"{name} ({entry.transport}, {trust}{where}): {state}{skipped}")
        return lines

    def warning_lines(self) -> list[str]:
        """Stdio servers that run unsandboxed, and entry patterns that match none of their
        server's tools (a likely typo, or a tool the server renamed)."""
        lines = [f"MCP server {name}: {why}" for name, why in {**self.unsandboxed(), **self.sandbox_problems()}.items()]
        return lines + [f"MCP server {name}: {warning}" for name, warnings in self.warnings.items() for warning in warnings]

    def unsandboxed(self) -> dict[str, str]:
        """Why each stdio server that runs with the worker's view of the machine does (activities/mcp/sandbox.py)."""
        found = {}
        for name, entry in self.entries.items():
            if entry.command is None:
                continue
            if entry.sandbox_grant is None:
                found[name] = ('not sandboxed ("sandbox": false): it can read what the worker\'s user can, '
                               "the worker's key files and, as root, its environment")
            elif bwrap_path() is None:
                found[name] = ("not sandboxed: bwrap (Debian package bubblewrap) is not installed; it can read what "
                               "the worker's user can, the worker's key files and, as root, its environment")
        return found

    def sandbox_problems(self) -> dict[str, str]:
        """Sandboxed stdio servers that cannot start because bwrap cannot make a sandbox here."""
        bwrap = bwrap_path()
        sandboxed = [name for name, entry in self.entries.items() if entry.command is not None and entry.sandbox_grant]
        problem = bwrap_problem(bwrap) if bwrap and sandboxed else None
        return {name: (f"its sandbox cannot start here ({problem}), so it does not run: give the container what bwrap "
                       'needs (user namespaces), or say "sandbox": false in its entry knowingly')
                for name in sandboxed} if problem else {}

    def offer(self, server: str, tools: list[types.Tool]) -> None:
        """Replace a server's tools in the catalog with what it lists now.

        New sessions see the change at once; running sessions keep what their
        recorded steps say (see docs/mcp.md)."""
        entry = self.entries[server]
        offered: set[str] = set()
        skipped: list[str] = []
        listed: list[tuple[str, str]] = []
        room = MAX_OFFERED_BYTES - sum(size for name, size in self.sizes.items() if name not in self.offered[server])
        for tool in tools:
            name = offered_name(server, tool.name)
            title = tool.annotations.title if tool.annotations else None  # shown and defused like the description
            size = json_size([tool.description, tool.input_schema, *([title] if title else [])])
            problem = None if OFFERED_NAME.match(name) else "its name does not fit mcp__<server>__<tool> in 64 letters, digits, _ or -"
            problem = problem or self.taken(server, name) or schema_problem(tool.input_schema)
            if problem is None and size > MAX_TOOL_BYTES:
                problem = f"its description{', title' if title else ''} and schema are {size} bytes; at most {MAX_TOOL_BYTES}"
            if problem is None and size > room:
                problem = f"the MCP tools offered already take close to {MAX_OFFERED_BYTES} bytes"
            if problem:
                skipped.append(f"{tool.name} ({problem})")
                continue
            room -= size
            self.sizes[name] = size
            policy = policy_for(server, entry, tool, name)
            listed.append((tool.name, name))
            self.catalog.add(SchemaToolSpec(
                name=name,
                # What a server says of its tool reaches the model and the card: defused like its results.
                description=defused((tool.description or (tool.annotations and tool.annotations.title) or tool.name).strip()),
                input_schema=tool.input_schema,
                needs_approval=policy.needs_approval,
                destructive=policy.destructive,
                approval_rule=policy.rule,
                runner=self._runner(server, tool.name, policy.repeatable),
                source=f"MCP server {server}",
                annotations=defused_annotations(tool.annotations),
                policy_note=policy.why,
            ))
            offered.add(name)
        for gone in self.offered[server] - offered:
            self.catalog.remove(gone)
            self.sizes.pop(gone, None)
        if skipped and skipped != self.skipped[server]:
            log.warning("MCP server %s: not offering %s", server, "; ".join(skipped))
        self.offered[server], self.skipped[server] = offered, skipped
        warnings = entry.unmatched_patterns(listed)
        if warnings != self.warnings[server]:
            for warning in warnings:
                log.warning("MCP server %s: %s", server, warning)
        self.warnings[server] = warnings

    def taken(self, server: str, name: str) -> str | None:
        """Why `name` is not this server's to offer: server "a" with tool "b__c" and server "a__b"
        with tool "c" are both mcp__a__b__c. The first keeps it, so a server cannot put its own
        tool (and its own read-only hint) in the place of another's, nor take that one away."""
        if name in self.offered[server] or self.catalog.get(name) is None:
            return None
        owner = next((other for other, names in self.offered.items() if name in names), None)
        return f"{name} is already offered by {f'MCP server {owner}' if owner else 'the worker'}"

    def _runner(self, server: str, tool: str, repeatable: bool) -> Any:
        async def run(args: dict[str, Any], context: ToolContext) -> str:
            return await self.call(server, tool, args, context, repeatable)

        return run

    async def call(self, server: str, tool: str, args: dict[str, Any], context: ToolContext, repeatable: bool) -> str:
        """Call a tool once per activity attempt; an unrepeatable one at most once per tool call."""
        offered = offered_name(server, tool)
        if not repeatable and has_receipt(context.workspace, context.session_id, context.call_id):
            raise ToolError(_maybe_happened(offered, "an earlier attempt was interrupted after the call was sent"))

        def before_sending() -> None:
            if not repeatable:
                write_receipt(context.workspace, context.session_id, context.call_id, offered, "sent to the MCP server")

        answered = context.tool_input
        try:
            result = await self.connections[server].call(
                tool, args, before_sending, READY_WAIT_SECONDS,
                input_responses=responses_for(answered) if answered else None,
                request_state=answered.get("request_state") if answered else None)
        except ServerUnavailable:
            raise  # not sent: the activity's next attempt tries again, the last one tells the model
        except CallInterrupted as error:
            if repeatable:
                raise  # read-only or idempotent: sending it again is safe
            raise ToolError(_maybe_happened(offered, str(error))) from None
        except MCPError as error:
            raise ToolError(f"the MCP server {server!r} refused the call: {defused(error.error.message)}") from None
        if isinstance(result, types.InputRequiredResult):
            if not repeatable:  # the server answered: nothing is in doubt, and the answered call is sent again
                remove_receipt(context.workspace, context.session_id, context.call_id)
            raise InputRequired(question_from(server, result))
        if result.is_error:
            raise ToolError(as_tool_output(offered, result_text(result)))
        return as_tool_output(offered, result_text(result))


def _maybe_happened(tool: str, why: str) -> str:
    return (f"{tool} may or may not have taken effect: {why}. It was not sent again, so it ran at most once; "
            "check its effect (e.g. with a read-only tool) before calling it again.")


def toolbox_from_env() -> McpToolbox:
    """The servers HITL_MCP_CONFIG names (none when unset); raises McpConfigError for a bad file."""
    return McpToolbox(config_from_env())


def defused_annotations(annotations: types.ToolAnnotations | None) -> dict[str, Any] | None:
    """The server's annotations as the catalog keeps them, their title defused (its hints are flags)."""
    if annotations is None:
        return None
    kept = annotations.model_dump(by_alias=True, exclude_none=True)  # camelCase, as the catalog always kept them
    if isinstance(kept.get("title"), str):
        kept["title"] = defused(kept["title"])
    return kept
