"""The API's refusals as A2A's JSON-RPC errors: the same one line, the HTTP status beside it.

A2A has no "forbidden" or "conflict" error, so a refusal keeps its HTTP status in
the error's data (`{"status": 403}`) and its reason as the message.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from a2a.utils.errors import A2AError, InternalError, InvalidParamsError, InvalidRequestError, TaskNotFoundError
from fastapi import HTTPException


@contextmanager
def as_a2a_errors(session_level: bool = False) -> Iterator[None]:
    """Inside, an HTTPException becomes an A2A error; with `session_level`, a 404 is about the
    session itself (the task is not found, or not the caller's to see)."""
    try:
        yield
    except HTTPException as error:
        raise a2a_error(error.status_code, str(error.detail), session_level) from None


def a2a_error(status: int, reason: str, session_level: bool = False) -> A2AError:
    data = {"status": status}
    if status == 404 and session_level:
        return TaskNotFoundError(reason, data)
    if status in (404, 422):
        return InvalidParamsError(reason, data)
    if status >= 500:
        return InternalError(reason, data)
    return InvalidRequestError(reason, data)
