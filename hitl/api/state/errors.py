"""What the API's state raises: a store that does not answer, a setting that names none."""


class StateUnavailable(RuntimeError):
    """The shared store did not answer; the message says so in one line (a 503)."""


class StateConfigError(ValueError):
    """HITL_API_STATE names no store this API can use (the server stops with the reason)."""
