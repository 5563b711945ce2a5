"""An MCP server asking a person something during a tool call (MCP 2026-07-28, multi round-trip requests).

A tool call answered with `input_required` does not wait in the worker: the
activity ends with the question (InputRequired), the workflow opens a question
pause like ask_user_question's, and once a person answers (or declines, or the
session is cancelled) the call is sent again with the kept `requestState` and
the `inputResponses`. So the question waits as long as any question and
survives any number of worker restarts.

What the server sends is untrusted: its size is bounded, a form's schema must
be the flat object of primitive fields the spec allows (else the model reads a
clear tool error), a URL must be https (plain http to loopback only), and its text is defused like a
tool's output. An older server's `elicitation/create` mid-call is declined
with the reason (`decline_live_elicitation`): this client answers questions
only through durable pauses.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from mcp import types
from mcp.client.session import ClientRequestContext

from activities.mcp.results import defused
from activities.tools.errors import ToolError
from workflows.limits import clip, json_size

MAX_REQUEST_BYTES = 32_000  # the question as the server sent it: message, schema or URL
MAX_STATE_BYTES = 64_000  # the opaque requestState, kept in the session's history until the retry
MAX_FIELDS = 20
PRIMITIVE = {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean"}


class InputRequired(Exception):
    """The server needs a person's input before it can answer: `question` says what, for the workflow."""

    def __init__(self, question: dict[str, Any]) -> None:
        super().__init__(question["question"])
        self.question = question


def question_from(server: str, result: types.InputRequiredResult) -> dict[str, Any]:
    """The pause the workflow opens for `result`, or ToolError saying why it cannot be asked."""
    requests = result.input_requests or {}
    state = result.request_state
    if state is not None and len(state.encode()) > MAX_STATE_BYTES:
        raise ToolError(f"the MCP server {server!r} asked for input with a requestState over {MAX_STATE_BYTES} bytes")
    if len(requests) != 1:
        raise ToolError(f"the MCP server {server!r} asked for {len(requests)} inputs at once; "
                        "this client asks a person one question per round")
    (key, request), = requests.items()
    if not isinstance(request, types.ElicitRequest):
        raise ToolError(f"the MCP server {server!r} asked for {request.method}; this client answers only elicitation")
    params = request.params
    if json_size(params.model_dump(mode="json", by_alias=True)) > MAX_REQUEST_BYTES:
        raise ToolError(f"the MCP server {server!r} asked a question over {MAX_REQUEST_BYTES} bytes")
    asked: dict[str, Any] = {"server": server, "key": key, "request_state": state,
                             "question": defused(params.message)}
    if isinstance(params, types.ElicitRequestURLParams):
        asked.update(mode="url", url=params.url, domain=_domain(server, params.url), choices=["done"])
        asked["question"] += f"\n\nOpen {params.url} (domain {asked['domain']}), then answer \"done\"."
    else:
        asked.update(mode="form", fields=fields_of(server, params.requested_schema))
    return asked


def fields_of(server: str, schema: Any) -> list[dict[str, Any]]:
    """A requested schema as the pause's typed fields (workflows/forms.py checks the answer against them)."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise ToolError(f"the MCP server {server!r} asked with a schema that is not an object of properties")
    properties, required = schema["properties"], schema.get("required") or []
    if not properties or len(properties) > MAX_FIELDS:
        raise ToolError(f"the MCP server {server!r} asked for {len(properties)} fields; 1 to {MAX_FIELDS} are supported")
    if not isinstance(required, list):
        raise ToolError(f"the MCP server {server!r} asked with a schema whose required is not a list")
    return [_field(server, str(name), spec, name in required) for name, spec in properties.items()]


def _field(server: str, name: str, spec: Any, required: bool) -> dict[str, Any]:
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in PRIMITIVE:
        raise ToolError(f"the MCP server {server!r} asked for field {clip(name, 60)!r} of an unsupported kind "
                        f"({clip(str(kind), 60)}); supported: {', '.join(PRIMITIVE)}")
    field: dict[str, Any] = {"name": name, "type": PRIMITIVE[kind], "required": required}
    description = spec.get("description") or spec.get("title")
    if isinstance(description, str):
        field["description"] = defused(clip(description, 500))
    choices = spec.get("enum") or [option.get("const") for option in spec.get("oneOf") or [] if isinstance(option, dict)]
    if choices:
        field.update(type="enum", choices=[str(choice) for choice in choices])
    elif kind == "string" and spec.get("format") == "date":
        field["type"] = "date"
    return field


LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _domain(server: str, url: str) -> str:
    """The host a URL-mode question sends the person to: https, or plain http to this machine only
    (a page elsewhere over http could be read or changed on its way, and it is where a person signs in)."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ToolError(f"the MCP server {server!r} asked the person to open a URL that is not http(s): {clip(url, 200)!r}")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        raise ToolError(f"the MCP server {server!r} asked the person to open a plain http URL, which this client "
                        f"refuses (https, or http to loopback only): {clip(url, 200)!r}")
    return parts.hostname


def responses_for(tool_input: dict[str, Any]) -> dict[str, Any]:
    """The workflow's answer as the retried call's inputResponses."""
    answer = {"action": tool_input["action"]}
    if tool_input["action"] == "accept" and isinstance(tool_input.get("content"), dict):
        answer["content"] = tool_input["content"]
    return {tool_input["key"]: types.ElicitResult.model_validate(answer)}


async def decline_live_elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ErrorData:
    """An older server's elicitation/create mid-call: declined with the reason, which the server reads."""
    return types.ErrorData(code=types.INVALID_REQUEST, message=(
        "this client asks a person only through a durable pause (MCP 2026-07-28 input_required); "
        "a question during a call of an older protocol version is declined"))
