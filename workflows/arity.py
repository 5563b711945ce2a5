"""Every signal and Update of the session takes one JSON value: this interceptor makes it so.

The SDK calls a handler with as many arguments as the sender sent. `temporal
workflow signal --name approve` without `--input` sends none, and a handler
that takes one then raises TypeError, which fails the workflow task for ever
(the signal stays in the history). So none becomes `None` (the payload `null`:
approve the one pending call), and more than one becomes a value the handlers
refuse and record, like any other malformed payload.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from temporalio.worker import (
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

Handled = TypeVar("Handled", HandleSignalInput, HandleUpdateInput)


@dataclasses.dataclass(frozen=True)
class TooManyArguments:
    """What a handler receives in place of several arguments."""

    count: int


def one_argument(input: Handled) -> Handled:
    if len(input.args) == 1:
        return input
    return dataclasses.replace(input, args=[TooManyArguments(len(input.args)) if input.args else None])


class OneArgumentInbound(WorkflowInboundInterceptor):
    async def handle_signal(self, input: HandleSignalInput) -> None:
        return await super().handle_signal(one_argument(input))

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        return super().handle_update_validator(one_argument(input))

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        return await super().handle_update_handler(one_argument(input))


class OneArgument(Interceptor):
    """Registered by HitlPlugin (hitl/plugin.py) on every worker and replayer."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return OneArgumentInbound
