"""Tools from MCP servers: configuration, connections, approval policy and calls (see docs/mcp.md).

Internal: not a public API, and it may change in any release. Programs import only the
public face, `hitl` (its `__all__`: tool, ToolContext, ToolError, HitlClient, Session,
Refused, HitlPlugin, and `hitl.testing`); docs/architecture.md, "The public face".
"""

from activities.mcp.config import CONFIG_VARIABLE, McpConfigError, ServerEntry, config_from_env, load_config, parse_config
from activities.mcp.toolbox import McpToolbox, offered_name, toolbox_from_env

__all__ = [
    "CONFIG_VARIABLE", "McpConfigError", "McpToolbox", "ServerEntry", "config_from_env", "load_config",
    "offered_name", "parse_config", "toolbox_from_env",
]
