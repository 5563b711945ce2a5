"""The tool catalog: what tools exist, their schemas and approval policies.

Its own package, below both layers: the workflow reads it (the schemas it
offers, the question tool) and the activities fill and run it (built-in, user
and MCP tools). It imports neither, so nothing in workflows/ imports activities/.

Internal: not a public API, and it may change in any release. Programs import only the
public face, `hitl` (its `__all__`: tool, ToolContext, ToolError, HitlClient, Session,
Refused, HitlPlugin, and `hitl.testing`); docs/architecture.md, "The public face".
"""

from hitl.catalog.questions import ASK_USER_QUESTION, question_of
from hitl.catalog.schema_tools import ArgumentsRejected, SchemaToolSpec
from hitl.catalog.specs import CATALOG, ApprovalPolicy, ToolCatalog, ToolContext, ToolSpec, tool

__all__ = [
    "ASK_USER_QUESTION", "ApprovalPolicy", "ArgumentsRejected", "CATALOG", "SchemaToolSpec",
    "ToolCatalog", "ToolContext", "ToolSpec", "question_of", "tool",
]
