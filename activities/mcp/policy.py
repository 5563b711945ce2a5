"""Approval from an MCP tool's own annotations, with the server entry's word last.

A tool its server marks read-only runs without asking; every other tool asks a
person, and one marked destructive says so in the pending item. An entry's
`auto_approve` / `require_approval` overrides the annotations either way.
Annotations are hints from the server, so the default when they are missing is
to ask. Whether a retry is safe follows them too: only read-only or idempotent
tools are sent again after a call was interrupted (see activities/mcp/toolbox.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp import types

from activities.mcp.config import ServerEntry


@dataclass(frozen=True)
class McpPolicy:
    needs_approval: bool
    destructive: bool
    repeatable: bool  # safe to send again when an earlier try may have reached the server
    rule: str | None = None  # why it runs without asking, when a setting says so


def policy_for(server: str, entry: ServerEntry, tool: types.Tool, offered_as: str) -> McpPolicy:
    hints = tool.annotations or types.ToolAnnotations()
    read_only = hints.readOnlyHint is True
    destructive = not read_only and hints.destructiveHint is True
    repeatable = read_only or hints.idempotentHint is True
    override = entry.override_for(tool.name, offered_as)
    if override == "auto":
        return McpPolicy(False, destructive, repeatable, rule=f"auto_approve of MCP server {server}")
    if override == "require":
        return McpPolicy(True, destructive, repeatable)
    return McpPolicy(not read_only, destructive, repeatable)
