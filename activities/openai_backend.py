"""Any OpenAI-compatible chat-completions endpoint, with Temporal doing the retrying.

The client's own retries are off: an error is classified once here, and
Temporal's retry policy (durable, visible in history) does the waiting.
"""

from __future__ import annotations

import email.utils
import json
import time
from datetime import timedelta
from typing import Any

import openai
from temporalio.exceptions import ApplicationError

from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest

RETRYABLE_STATUS = {408, 409, 429}
MAX_CONTENT = 100_000  # a runaway reply must not outgrow Temporal's 2 MB payload limit


class OpenAIBackend:
    def __init__(self, api_key: str, base_url: str | None, default_model: str, timeout_seconds: float = 120) -> None:
        self.default_model = default_model
        self.client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_seconds
        )
        self.description = f"OpenAI-compatible endpoint {self.client.base_url} (default model {default_model})"

    async def complete(self, request: ModelRequest) -> ModelReply:
        arguments: dict[str, Any] = {
            "model": request.model or self.default_model,
            "messages": [message.to_openai() for message in request.messages],
        }
        if request.tools:
            arguments["tools"] = request.tools
        try:
            response = await self.client.chat.completions.create(**arguments)
        except openai.APIStatusError as error:
            raise classify(error) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as error:
            raise ApplicationError(f"model endpoint unreachable: {error}", type="ModelUnavailable") from None
        if not response.choices:
            raise ApplicationError("model endpoint returned no choices", type="ModelUnavailable")
        message = response.choices[0].message
        return ModelReply(
            content=message.content[:MAX_CONTENT] if isinstance(message.content, str) else None,
            tool_calls=[
                ToolCall(id=call.id or "", function=FunctionCall(name=call.function.name or "", arguments=as_text(call.function.arguments)))
                for call in message.tool_calls or []
                if getattr(call, "function", None) is not None
            ],
        )


def as_text(arguments: Any) -> str:
    """Arguments as the JSON text OpenAI sends; some servers send the object itself."""
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def classify(error: openai.APIStatusError) -> ApplicationError:
    """408/409/429/5xx are worth another try (after Retry-After); other 4xx are final."""
    status = error.status_code
    detail = provider_message(error)
    if status in RETRYABLE_STATUS or status >= 500:
        return ApplicationError(
            f"model endpoint answered {status}: {detail}",
            type="ModelUnavailable",
            next_retry_delay=retry_after(error.response),
        )
    return ApplicationError(
        f"model endpoint refused the request ({status}): {detail}",
        type="ModelRequestRejected",
        non_retryable=True,
    )


def provider_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return error.message


def retry_after(response: Any) -> timedelta | None:
    headers = response.headers
    if "retry-after-ms" in headers:
        try:
            return timedelta(milliseconds=float(headers["retry-after-ms"]))
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return timedelta(seconds=max(0.0, float(value)))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return timedelta(seconds=max(0.0, when.timestamp() - time.time()))
