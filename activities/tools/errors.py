"""ToolError: a tool's refusal or failure that the model reads."""


class ToolError(Exception):
    """A tool's refusal or failure that the model should read, not a crash to retry."""
