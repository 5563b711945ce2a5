"""The activities: the session's doors to the world (the model, tools, MCP servers, notices)."""
