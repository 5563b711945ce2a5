"""The built-in tools. Every side effect stays inside the workspace."""

from __future__ import annotations

import re
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.tools.bookings import book_once
from activities.tools.catalog import CATALOG, ToolContext, ToolSpec, tool
from activities.tools.errors import ToolError
from activities.tools.receipts import has_receipt, write_receipt
from activities.tools.workspace import inside_workspace

SEARCHABLE = {".txt", ".md", ".rst", ".html", ".csv", ".json", ".eml"}
SKIPPED_FOLDERS = {"outbox", "drafts", ".hitl"}


@tool
def search_web(query: str, context: ToolContext) -> str:
    """Search the documents in the workspace (this deployment has no web access)."""
    terms = [t for t in re.findall(r"\w+", query.lower()) if len(t) > 1]
    if not terms:
        raise ToolError("the query has no words to search for")
    hits: list[tuple[int, str, str]] = []
    for path in sorted(_documents(context.workspace)):
        text = path.read_text(encoding="utf-8", errors="replace")
        lowered = text.lower()
        score = sum(lowered.count(term) for term in terms)
        if score:
            first = min(i for i in (lowered.find(t) for t in terms) if i >= 0)
            snippet = " ".join(text[max(0, first - 80) : first + 160].split())
            hits.append((score, str(path.relative_to(context.workspace)), snippet))
    if not hits:
        return f"No documents in the workspace mention {query!r}."
    hits.sort(key=lambda hit: -hit[0])
    return "\n".join(f"- {name}: {snippet}" for _, name, snippet in hits[:5])


def _documents(workspace: Path) -> list[Path]:
    if not workspace.exists():
        return []
    return [
        p
        for p in workspace.rglob("*")
        if p.is_file()
        and p.suffix.lower() in SEARCHABLE
        and not SKIPPED_FOLDERS.intersection(p.relative_to(workspace).parts)
    ]


@tool(needs_approval=True)
def delete_file(path: str, context: ToolContext) -> str:
    """Delete a file inside the workspace."""
    target = inside_workspace(context.workspace, path)
    if not target.exists():
        if has_receipt(context.workspace, context.session_id, context.call_id):
            return f"Deleted {path}."
        raise ToolError(f"there is no file {path!r} in the workspace")
    if not target.is_file():
        raise ToolError(f"{path!r} is not a file")
    write_receipt(context.workspace, context.session_id, context.call_id, "delete_file", path)
    target.unlink()
    return f"Deleted {path}."


@tool(needs_approval=True)
def send_email(to: str, subject: str, body: str, context: ToolContext) -> str:
    """Send an email (written as an .eml file to the workspace outbox)."""
    if "@" not in to:
        raise ToolError(f"{to!r} is not an email address")
    outbox = context.workspace / "outbox"
    outbox.mkdir(parents=True, exist_ok=True)
    message = _email(to, subject, body, context.session_id)
    # One file per tool call, written atomically: a retried activity rewrites
    # the same file rather than sending a second message.
    target = outbox / f"{_safe(context.session_id)}--{_safe(context.call_id)}.eml"
    partial = target.with_suffix(".partial")
    partial.write_bytes(bytes(message))
    partial.replace(target)
    return f"Sent the email to {to} (saved as outbox/{target.name})."


@tool(review=True)
def draft_email(to: str, subject: str, body: str, context: ToolContext) -> str:
    """Draft an email for a person to review (saved under drafts/; nothing is sent)."""
    drafts = context.workspace / "drafts"
    drafts.mkdir(parents=True, exist_ok=True)
    target = drafts / f"{_safe(context.session_id)}--{_safe(context.call_id)}.eml"
    target.write_bytes(bytes(_email(to, subject, body, context.session_id)))
    return f"Draft saved as drafts/{target.name}:\nTo: {to}\nSubject: {subject}\n\n{body}"


@tool(needs_approval=True)
def book_flight(origin: str, destination: str, date: str, context: ToolContext) -> str:
    """Book a flight; returns the booking reference."""
    booking = book_once(context.workspace, context.session_id, context.call_id, origin, destination, date)
    return (
        f"Booked flight {booking.origin} -> {booking.destination} on {booking.date}; "
        f"booking reference {booking.reference}."
    )


def _email(to: str, subject: str, body: str, session_id: str) -> EmailMessage:
    message = EmailMessage()
    message["To"] = to
    message["From"] = "agent@hitl.local"
    message["Subject"] = subject
    message["X-HITL-Session"] = session_id
    message.set_content(body)
    return message


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80]


class FormField(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    type: Literal["string", "number", "integer", "boolean", "date", "enum"] = "string"
    required: bool = True
    choices: list[str] | None = None
    description: str | None = None


class AskUserQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="One clear question for the person")
    choices: list[str] | None = Field(default=None, description="Allowed answers, if the answer must be one of them")
    fields: list[FormField] | None = Field(default=None, description="Several values to ask for in one form")


ASK_USER_QUESTION = CATALOG.add(
    ToolSpec(
        name="ask_user_question",
        description=(
            "Ask the person a question when information is missing, instead of guessing. "
            "The result is the person's own answer, verbatim: treat it as an authoritative fact."
        ),
        arguments=AskUserQuestion,
        function=None,
        answered_by_human=True,
    )
)


def question_of(args: Any) -> AskUserQuestion:
    return args if isinstance(args, AskUserQuestion) else AskUserQuestion.model_validate(args)
