"""`python starter.py tools`: every tool a worker with this environment offers, and its approval policy.

It builds the catalog the way `python worker.py` does, from the same
environment (the built-in tools, HITL_TOOL_MODULES, HITL_MCP_CONFIG), briefly
connecting to each MCP server to list its tools, so run it with the worker's
settings. Session rules (`auto_approve`, `require_approval`, approvers) apply
on top, per session.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from activities.mcp import McpConfigError, toolbox_from_env
from activities.mcp.sandbox import make_undumpable
from activities.tools import CATALOG
from hitl.catalog import SchemaToolSpec, ToolSpec
from hitl.console.render import print_json, say
from hitl.worker import ToolModulesError, load_tool_modules


def source_of(spec: ToolSpec) -> str:
    if isinstance(spec, SchemaToolSpec):
        return spec.source or "schema"
    defined_in = inspect.getmodule(spec.function) if spec.function is not None else None
    module = defined_in.__name__ if defined_in is not None else "catalog"
    return "built-in" if module.startswith(("activities.", "catalog")) else f"user ({module})"


async def list_tools(as_json: bool) -> int:
    make_undumpable()  # it starts the MCP servers too
    try:
        load_tool_modules()
        toolbox = toolbox_from_env()
    except (ToolModulesError, McpConfigError) as error:
        say(f"error: {error}", file=sys.stderr)
        return 2
    async with toolbox:
        rows: list[dict[str, Any]] = [
            {"name": spec.name, "source": source_of(spec), "approval": spec.policy(), "description": spec.description}
            for spec in CATALOG.select(None)
        ]
        unreachable = [line for line in toolbox.describe() if "not reachable" in line]
        warnings = toolbox.warning_lines()
    if as_json:
        print_json({"tools": rows, "unreachable_servers": unreachable, "warnings": warnings})
        return 0
    name_width = max(len(row["name"]) for row in rows)
    approval_width = max(len(row["approval"]) for row in rows)
    for row in rows:
        say(f"{row['name']:<{name_width}}  {row['approval']:<{approval_width}}  {row['source']}")
    for line in unreachable:
        say(f"MCP server {line}: its tools are missing above")
    for line in warnings:
        say(f"warning: {line}")
    return 0
