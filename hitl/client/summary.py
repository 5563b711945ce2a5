"""What the Temporal UI shows for a session: its summary (the row and header) and details (user metadata).

Every way of starting a session sets them (`starter.py start`, the chat, `./demo.sh`; the API has its
own line), so no session reads "No summary available". They are built as plain payloads,
deliberately outside the encryption codec, so an operator reads them without the key: with
encryption on they carry no conversation content, only who started the session, how it is set
up, and what a person can do about it.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import Payload

from hitl.settings import DATA_CONVERTER

SUMMARY_CHARACTERS = 80


def session_summary(request: dict[str, Any], session_id: str, *, started_with: str,
                    encrypted: bool) -> tuple[Payload, Payload]:
    """(summary, details) for `client.start_workflow(static_summary=..., static_details=...)`."""
    who = f" by {request['by']}" if request.get("by") else ""
    if encrypted:
        summary = f"Agent session{who}; conversation encrypted"
    else:
        first = " ".join(str(request["message"]).split())
        clipped = first[:SUMMARY_CHARACTERS] + ("…" if len(first) > SUMMARY_CHARACTERS else "")
        summary = f"Agent session{who}: {clipped}"
    tools = ", ".join(request["tools"]) if request.get("tools") else "all registered tools"
    details = "\n".join([
        f"**Session** `{session_id}`, started with `{started_with}`{who}.",
        f"**Tools**: {tools}. **Model**: {request.get('model') or 'the worker default'}.",
        "**Waiting for a person?** The `HitlState` search attribute says so (`awaiting_human`); "
        "the current details above name the call.",
        f"- see what waits: `python starter.py pending {session_id}` "
        f"(or `temporal workflow query --workflow-id {session_id} --name pending`)",
        f"- decide: `python starter.py approve {session_id}` / `reject {session_id} --reason ...` / "
        f"`answer {session_id} ...`, or in the chat: `python starter.py chat --session {session_id}`",
        "- every open pause across sessions: `python starter.py inbox`, or the web inbox of `starter.py serve`",
    ])
    plain = DATA_CONVERTER.payload_converter
    return plain.to_payload(summary), plain.to_payload(details)
