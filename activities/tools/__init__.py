"""Tools: the built-ins registered on import; the catalog itself is the top-level `catalog` package.

Internal: not a public API, and it may change in any release. Programs import only the
public face, `hitl` (its `__all__`: tool, ToolContext, ToolError, HitlClient, Session,
Refused, HitlPlugin, and `hitl.testing`); docs/architecture.md, "The public face".
"""

from activities.tools import builtin  # noqa: F401  (registers the built-in tools)
from hitl.catalog import CATALOG, ToolContext, ToolSpec, tool
from activities.tools.errors import ToolError

__all__ = ["CATALOG", "ToolContext", "ToolError", "ToolSpec", "tool"]
