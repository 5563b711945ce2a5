"""What callers send, read under the workflow's control: a raw payload decoded, or a refusal.

Signals and Updates take their payloads raw (RawValue) so that one nested past any parser's
limit, or in an unknown encoding, becomes a recorded refusal rather than a workflow task that
fails on every retry (workflows/inbound.py).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from workflows.arity import TooManyArguments
from workflows.decisions import Refusal
from workflows.limits import RECORDED_BYTES, clip, unreadable_reason


def refused(reason: str, code: str) -> ApplicationError:
    """An Update's refusal as its caller receives it: the reason, and the code in the details."""
    return ApplicationError(reason, code, type="Refusal", non_retryable=True)


def decoded(payload: RawValue | None | TooManyArguments) -> Any:
    """A raw payload as plain JSON values, or a Refusal that says what is wrong with it.
    None when nothing was sent (see workflows/arity.py)."""
    if payload is None:
        return None
    if not isinstance(payload, RawValue):  # TooManyArguments (made outside the sandbox: compared by what it is)
        raise Refusal(f"malformed payload: {getattr(payload, 'count', 'several')} arguments were sent; send one JSON value", code="invalid")
    reason = unreadable_reason(payload.payload.metadata)
    if reason is not None:
        raise Refusal(f"unreadable payload: {reason}", code="invalid")
    try:
        return workflow.payload_converter().from_payload(payload.payload)
    except Exception as error:
        raise Refusal(f"malformed payload: {clip(str(error), RECORDED_BYTES)}", code="invalid") from None
