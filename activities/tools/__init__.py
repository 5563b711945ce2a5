"""Tools: the catalog, and the built-ins registered on import."""

from activities.tools import builtin  # noqa: F401  (registers the built-in tools)
from activities.tools.catalog import CATALOG, ToolContext, ToolSpec, tool
from activities.tools.errors import ToolError

__all__ = ["CATALOG", "ToolContext", "ToolError", "ToolSpec", "tool"]
