"""What one model reply may carry, in UTF-8 bytes, whichever backend produced it.

The model activity's result is recorded in history and must stay far below
Temporal's 2 MB payload limit, so every reply is bounded here before it is
returned: the text cut on a character boundary, ids and names cut (the
planner then refuses an unknown tool), arguments too large replaced by a
marker the planner refuses (never cut into different arguments), and at most
MAX_TOOL_CALLS calls.

Every text of it is well-formed too (workflows/limits.py): a lone surrogate in the
content, an id, a name or the arguments (escaped in their JSON, too) is U+FFFD, so the reply
can be stored and the model reads its odd reply back, or the planner's refusal of it.
"""

from __future__ import annotations

import json

from workflows.conversation import FunctionCall, ModelReply, ToolCall
from workflows.limits import json_well_formed, well_formed
from workflows.planning import OVERSIZED_ARGUMENTS

MAX_CONTENT_BYTES = 100_000  # the reply's text, cut on a character boundary
MAX_ARGUMENTS_BYTES = 32_768  # one tool call's arguments; larger ones are replaced, never cut
MAX_TOOL_CALLS = 64  # per reply; later calls are dropped
MAX_CALL_ID_BYTES = 256  # a call id or tool name longer than this is cut (ids are made unique later)
# All tool calls' arguments together, as JSON-escaped in the payload: 64 calls
# at the per-call limit (or escaping that multiplies a byte by six) must not
# push the reply over Temporal's 2 MB limit. Calls past it are replaced too.
# Worst case of a whole reply: 600 kB of escaped text + 800 kB of arguments +
# 64 escaped ids and names (200 kB) = 1.6 MB.
MAX_ALL_ARGUMENTS_BYTES = 800_000

__all__ = ["MAX_ARGUMENTS_BYTES", "MAX_CONTENT_BYTES", "OVERSIZED_ARGUMENTS", "bounded_reply", "cut_bytes"]


def bounded_reply(reply: ModelReply) -> ModelReply:
    """The reply within its byte limits."""
    budget = MAX_ALL_ARGUMENTS_BYTES
    calls = []
    for call in reply.tool_calls[:MAX_TOOL_CALLS]:
        arguments = json_well_formed(well_formed(call.function.arguments))  # the planner parses them
        size = len(arguments.encode("utf-8", "surrogatepass"))
        escaped = len(json.dumps(arguments, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > MAX_ARGUMENTS_BYTES or escaped > budget:
            arguments = oversized_arguments(size)
            escaped = len(json.dumps(arguments))
        budget -= escaped
        calls.append(ToolCall(
            id=cut_bytes(well_formed(call.id), MAX_CALL_ID_BYTES),
            function=FunctionCall(name=cut_bytes(well_formed(call.function.name), MAX_CALL_ID_BYTES), arguments=arguments),
        ))
    content = None if reply.content is None else cut_bytes(well_formed(reply.content), MAX_CONTENT_BYTES)
    return reply.model_copy(update={"content": content, "tool_calls": calls})


def oversized_arguments(size: int) -> str:
    """The arguments a call carries instead of ones too large to keep: never a truncation
    that would read as different arguments."""
    return json.dumps({OVERSIZED_ARGUMENTS: size})


def cut_bytes(text: str, limit: int) -> str:
    """At most `limit` UTF-8 bytes of `text`, cut on a character boundary."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")
