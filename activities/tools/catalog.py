"""The catalog's old address, kept for user tool modules that import it from here (see hitl/catalog/)."""

from hitl.catalog.specs import CATALOG, ApprovalPolicy, ToolCatalog, ToolContext, ToolSpec, arguments_model, tool, without_titles

__all__ = ["CATALOG", "ApprovalPolicy", "ToolCatalog", "ToolContext", "ToolSpec", "arguments_model", "tool", "without_titles"]
