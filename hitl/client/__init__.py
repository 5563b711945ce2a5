"""The client layer: how any program talks to sessions through Temporal.

Reading sessions across their runs, following their events, the inbox from
visibility, Updates sent with retry, what the Temporal UI shows, refusal codes.
Both faces sit on it (`hitl/api/`, HTTP; `hitl/console/`, the terminal) and
neither imports the other (tests/unit/test_layers.py); so does the public Python
client, `HitlClient` (python_client.py, exported as `hitl.HitlClient`).

Internal: not a public API, and it may change in any release. Programs import only the
public face, `hitl` (its `__all__`: tool, ToolContext, ToolError, HitlClient, Session,
Refused, HitlPlugin, and `hitl.testing`); docs/architecture.md, "The public face".
"""
