"""Tools: the built-ins registered on import; the catalog itself is the top-level `catalog` package."""

from activities.tools import builtin  # noqa: F401  (registers the built-in tools)
from hitl.catalog import CATALOG, ToolContext, ToolSpec, tool
from activities.tools.errors import ToolError

__all__ = ["CATALOG", "ToolContext", "ToolError", "ToolSpec", "tool"]
