"""The session workflow (AgentWorkflow) and the pure pieces it is built from; deterministic, run in Temporal's sandbox."""
