"""The failure converter: failures read without trusting their details.

A failure's details are payloads like any other, and anyone who reaches the Temporal frontend
can fail (or cancel) an activity by its id with details of their choosing. The SDK decodes them
as it applies the workflow activation, outside the workflow's code: details it could not read
(JSON that does not parse, an unknown encoding, a payload sealed under a key id the worker lacks)
failed the workflow task on every retry, and the session was stranded. Read here, a detail that
cannot be read stays a RawValue; the message, which is all the workflow reads of a failure
(workflows/activity_calls.py, failure_message), is kept. Clients read refusal codes from details
the same way and find no code in a RawValue (hitl/client/refusals.py).
"""

from __future__ import annotations

from typing import Any, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.common import RawValue
from temporalio.converter import DefaultFailureConverter, PayloadConverter


class TolerantDetails(PayloadConverter):
    """A payload converter whose reading never raises: what it cannot read is handed on raw."""

    def __init__(self, inner: PayloadConverter) -> None:
        self.inner = inner

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        return self.inner.to_payloads(values)

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[Any]:
        try:
            return self.inner.from_payloads(payloads, type_hints)
        except Exception:
            return [RawValue(payload) for payload in payloads]


class TolerantFailureConverter(DefaultFailureConverter):
    def from_failure(self, failure: Failure, payload_converter: PayloadConverter) -> BaseException:
        if not isinstance(payload_converter, TolerantDetails):
            payload_converter = TolerantDetails(payload_converter)
        return super().from_failure(failure, payload_converter)


class TolerantFailureConverterWithEncodedAttributes(TolerantFailureConverter):
    """Messages and stack traces in the (encrypted) encoded attributes, as the SDK's
    DefaultFailureConverterWithEncodedAttributes puts them."""

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)
