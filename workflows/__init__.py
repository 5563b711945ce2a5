"""The session workflow (AgentWorkflow) and the pure pieces it is built from; deterministic, run in Temporal's sandbox.

Internal: not a public API, and it may change in any release. Programs import only the
public face, `hitl` (its `__all__`: tool, ToolContext, ToolError, HitlClient, Session,
Refused, HitlPlugin, and `hitl.testing`); docs/architecture.md, "The public face".
"""
