"""Any OpenAI-compatible chat-completions endpoint, with Temporal doing the retrying.

The client's own retries are off: an error is classified once here, and
Temporal's retry policy (durable, visible in history) does the waiting.

Everything this module raises is an ApplicationError whose message has been
scrubbed of the API key and of anything that looks like a token, raised
`from None`: a provider that echoes the Authorization header in an error body
would otherwise put the key into the session's status, the workflow history,
the server's database and the worker log.

The reply body is parsed here, not trusted to the client's lenient models: a
malformed 200 becomes a counted ModelBadResponse failure, and what one reply
may carry is bounded in bytes (Temporal counts bytes; its payload limit is 2 MB).
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from datetime import timedelta
from typing import Any, NoReturn

import openai
from temporalio.exceptions import ApplicationError

from activities.observed_model import report_usage
from activities.reply_bounds import MAX_CALL_ID_BYTES, MAX_TOOL_CALLS, bounded_reply, cut_bytes
from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest

RETRYABLE_STATUS = {408, 409, 429}

MAX_PROVIDER_MESSAGE_CHARS = 2_000  # of an error a provider sends, kept in the failure
MAX_RETRY_AFTER_SECONDS = 600  # a provider asking for a day's wait must not park the session silently

REDACTED = "[redacted]"
BEARER_TOKEN = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]+")
KEY_LIKE_TOKEN = re.compile(r"\b(sk|pk|rk)[-_][A-Za-z0-9_\-]{6,}")


class OpenAIBackend:
    gen_ai_system = "openai"  # for the model call's span (activities/observed_model.py)

    def __init__(self, api_key: str, base_url: str | None, default_model: str, timeout_seconds: float = 120) -> None:
        self.default_model = default_model
        self._secrets = tuple(s for s in {api_key, api_key.strip()} if len(s) >= 4)
        self.client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_seconds
        )
        self.description = f"OpenAI-compatible endpoint {self.client.base_url} (default model {default_model})"

    async def complete(self, request: ModelRequest) -> ModelReply:
        """One call; every failure leaves here as a scrubbed ApplicationError with no cause chained."""
        try:
            return await self._complete(request)
        except ApplicationError as error:
            failure = error
        except Exception as error:  # noqa: BLE001 (a crash in parsing must be counted, not retried for ever)
            failure = ApplicationError(f"model call failed: {type(error).__name__}: {error}", type="ModelBadResponse")
        raise ApplicationError(
            self.scrub(failure.message),
            type=failure.type,
            non_retryable=failure.non_retryable,
            next_retry_delay=failure.next_retry_delay,
        ) from None

    async def _complete(self, request: ModelRequest) -> ModelReply:
        arguments: dict[str, Any] = {
            "model": request.model or self.default_model,
            "messages": [message.to_openai() for message in request.messages],
        }
        if request.tools:
            arguments["tools"] = request.tools
        try:
            response = await self.client.chat.completions.with_raw_response.create(**arguments)
            body = response.http_response.content
        except openai.APIStatusError as error:
            raise classify(error) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as error:
            raise ApplicationError(f"model endpoint unreachable: {error}", type="ModelUnavailable") from None
        return parse_reply(body)

    def scrub(self, text: str) -> str:
        """The text without the API key or anything shaped like a bearer or secret token."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        text = BEARER_TOKEN.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        text = KEY_LIKE_TOKEN.sub(lambda m: f"{m.group(1)}-{REDACTED}", text)
        return cut_text(text, MAX_PROVIDER_MESSAGE_CHARS)


def parse_reply(body: bytes) -> ModelReply:
    """The first choice of a chat-completions body, checked shape by shape."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        bad_response(f"the body is not JSON (starts {body[:60]!r})")
    if not isinstance(data, dict):
        bad_response(f"the body is a JSON {json_kind(data)}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list):
        if isinstance(data.get("error"), (dict, str)):
            bad_response(f"the endpoint answered 200 with an error: {data['error']}")
        bad_response(f"'choices' is {json_kind(choices)}, not a list")
    if not choices:
        bad_response("the reply has no choices")
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    report_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), data.get("model"))
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        bad_response(f"choices[0].message is {json_kind(message)}, not an object")
    return bounded_reply(ModelReply(content=content_text(message.get("content")), tool_calls=tool_calls_of(message.get("tool_calls"))))


def content_text(content: Any) -> str | None:
    """A string, or the text parts of a list of content parts (some servers send those)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "".join(part["text"] for part in content if isinstance(part.get("text"), str))
    bad_response(f"message.content is {json_kind(content)}, not text")


def tool_calls_of(calls: Any) -> list[ToolCall]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        bad_response(f"message.tool_calls is {json_kind(calls)}, not a list")
    parsed = []
    for index, call in enumerate(calls[:MAX_TOOL_CALLS]):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            bad_response(f"tool_calls[{index}] has no function with a name")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            bad_response(f"tool_calls[{index}].id is {json_kind(call_id)}, not a string")
        parsed.append(
            ToolCall(
                id=cut_bytes(call_id or "", MAX_CALL_ID_BYTES),
                function=FunctionCall(name=cut_bytes(function["name"], MAX_CALL_ID_BYTES), arguments=as_text(function.get("arguments"))),
            )
        )
    return parsed


def cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters cut]"


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(type(value), "number")


def bad_response(what: str) -> NoReturn:
    raise ApplicationError(f"model endpoint sent a malformed reply: {what}", type="ModelBadResponse")


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
    """The wait a provider asks for, within [0, MAX_RETRY_AFTER_SECONDS]; None if it asks none we can read."""
    headers = response.headers
    seconds: float | None = None
    if "retry-after-ms" in headers:
        seconds = number(headers["retry-after-ms"])
        seconds = None if seconds is None else seconds / 1000
    value = headers.get("retry-after")
    if seconds is None and value:
        seconds = number(value)
        if seconds is None:
            try:
                seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError, OverflowError):
                return None
    if seconds is None:
        return None
    return timedelta(seconds=min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS))


def number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
