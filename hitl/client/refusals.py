"""A session's refusal as its client receives it: the reason, and a machine-readable code.

The workflow refuses a bad Update with an ApplicationError whose message is the reason and
whose first detail is the code (workflows/decisions.py, `Refusal.code`: not_found, forbidden,
conflict, invalid, stale_run, busy). A client decides by the code, never by the English: the API
maps it to a status (hitl/api/gateway.py), the terminal prints the reason.
"""

from __future__ import annotations

from typing import get_args

from temporalio.client import WorkflowUpdateFailedError

from workflows.decisions import RefusalCode

REFUSAL_CODES: frozenset[str] = frozenset(get_args(RefusalCode))


def code_of(error: WorkflowUpdateFailedError) -> str | None:
    """The code a session's refusal sends beside its reason; None from a session that sent none."""
    details = getattr(getattr(error, "cause", None), "details", None) or ()
    return details[0] if details and isinstance(details[0], str) else None


def reason_of(error: BaseException) -> str:
    """The reason, as the session wrote it (with how to change one argument, when edited args missed some)."""
    cause = getattr(error, "cause", None)
    return with_edit_hint(getattr(cause, "message", None) or getattr(error, "message", None) or str(cause or error))


EDIT_MISSED_FIELDS = ("edited args do not fit ", ("Field required", "is a required property"))
EDIT_HINT = ("args replaces all of the call's arguments; to change one, use --set k=v (starter.py approve) "
             "or changes={...} (HitlClient), or send all of them")


def with_edit_hint(reason: str) -> str:
    """Edited arguments that miss required fields were most often meant as a change to one: the
    session's `args` replaces them all, and the reason says how to change one instead."""
    prefix, missing = EDIT_MISSED_FIELDS
    return f"{reason}; {EDIT_HINT}" if reason.startswith(prefix) and any(m in reason for m in missing) else reason


class Refused(Exception):
    """A decision (or message, or cancel) the session refused: `code` is one of REFUSAL_CODES (or None
    from a session that sent none), `reason` the session's own words. Nothing was applied."""

    def __init__(self, code: str | None, reason: str) -> None:
        super().__init__(f"refused ({code}): {reason}" if code else f"refused: {reason}")
        self.code = code
        self.reason = reason

    @classmethod
    def of(cls, error: WorkflowUpdateFailedError) -> Refused:
        return cls(code_of(error), reason_of(error))
