"""The built-in tools. Every side effect stays inside the workspace."""

from __future__ import annotations

import os
import re
import stat
from email.message import EmailMessage
from pathlib import Path
from typing import Iterator

from activities.tools.bookings import book_once
from hitl.catalog import ToolContext, tool
from hitl.catalog.questions import ASK_USER_QUESTION, AskUserQuestion, FormField, question_of  # noqa: F401  (their old home)
from activities.tools.errors import ToolError
from activities.tools.receipts import has_receipt, write_receipt
from activities.tools.workspace import (
    DRAFTS,
    FOLDER_FLAGS,
    OUTBOX,
    READ_FLAGS,
    RESERVED_FOLDERS,
    Identity,
    Workspace,
    identity,
)

SEARCHABLE = {".txt", ".md", ".rst", ".html", ".csv", ".json", ".eml"}
SKIPPED_FOLDERS = RESERVED_FOLDERS  # sent mail, drafts and receipts are the product's, not documents
MAX_SEARCH_DEPTH = 16  # folders deep; each level holds one descriptor open
MAX_DOCUMENT_BYTES = 1_000_000  # read of each document; a search must not load a disk image


@tool
def search_web(query: str, context: ToolContext) -> str:
    """Search the documents in the workspace (this deployment has no web access)."""
    terms = [t for t in re.findall(r"\w+", query.lower()) if len(t) > 1]
    if not terms:
        raise ToolError("the query has no words to search for")
    hits: list[tuple[int, str, str]] = []
    with Workspace(context.workspace) as workspace:
        for name, text in _documents(workspace):
            lowered = text.lower()
            score = sum(lowered.count(term) for term in terms)
            if score:
                first = min(i for i in (lowered.find(t) for t in terms) if i >= 0)
                snippet = " ".join(text[max(0, first - 80) : first + 160].split())
                hits.append((score, name, snippet))
    if not hits:
        return f"No documents in the workspace mention {query!r}."
    hits.sort(key=lambda hit: -hit[0])
    return "\n".join(f"- {name}: {snippet}" for _, name, snippet in hits[:5])


def _documents(workspace: Workspace) -> Iterator[tuple[str, str]]:
    """(relative name, text) of every searchable document, sorted by name.

    Walked through folder descriptors: links (to files or folders) are
    skipped, never read through, and the product's own files are never read,
    whatever their name."""
    reserved = workspace.reserved_identities()

    def walk(folder: int, prefix: str, depth: int) -> Iterator[tuple[str, str]]:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            name = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name in SKIPPED_FOLDERS or depth >= MAX_SEARCH_DEPTH:
                    continue
                try:
                    inner = os.open(entry.name, FOLDER_FLAGS, dir_fd=folder)
                except OSError:
                    continue  # became a link, or vanished, since the listing
                try:
                    if identity(os.fstat(inner)) not in reserved:
                        yield from walk(inner, name + "/", depth + 1)
                finally:
                    os.close(inner)
            elif entry.is_file(follow_symlinks=False) and Path(entry.name).suffix.lower() in SEARCHABLE:
                text = _read_document(folder, entry.name, reserved)
                if text is not None:
                    yield name, text

    yield from walk(workspace.fd, "", 0)


def _read_document(folder: int, name: str, reserved: set[Identity]) -> str | None:
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=folder)
    except OSError:
        return None  # a link (O_NOFOLLOW), or gone
    with os.fdopen(fd, "rb") as source:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or identity(status) in reserved:
            return None
        return source.read(MAX_DOCUMENT_BYTES).decode("utf-8", errors="replace")


@tool(needs_approval=True, destructive=True, effect="deletes {path}")
def delete_file(path: str, context: ToolContext) -> str:
    """Delete a file inside the workspace."""
    with Workspace(context.workspace) as workspace:
        folder, name = workspace.parent_of(path)
        try:
            status = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            # Gone: by this very call before a crash (its receipt says so), or never there.
            if has_receipt(context.workspace, context.session_id, context.call_id):
                return f"Deleted {path}."
            raise ToolError(f"there is no file {path!r} in the workspace") from None
        except OSError as error:
            raise ToolError(f"cannot reach {path!r}: {error.strerror}") from None
        if stat.S_ISDIR(status.st_mode):
            raise ToolError(f"{path!r} is not a file but a folder; delete_file deletes files only")
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISLNK(status.st_mode)):
            raise ToolError(f"{path!r} is not a file")
        workspace.refuse_if_reserved(path, status)
        # The receipt goes first: a retry after a crash between the two finds
        # the file gone and the receipt there, and reports success once.
        write_receipt(context.workspace, context.session_id, context.call_id, "delete_file", path)
        try:
            # Relative to the folder's descriptor, and unlink never follows a
            # link: a link is removed itself, and a folder swapped for a link
            # since the walk is not where this happens.
            os.unlink(name, dir_fd=folder)
        except FileNotFoundError:
            pass  # removed by someone else since the check: the file is gone either way
        except IsADirectoryError:
            raise ToolError(f"{path!r} became a folder; delete_file deletes files only") from None
        except PermissionError as error:
            raise ToolError(f"cannot delete {path!r}: {error.strerror}") from None
    if stat.S_ISLNK(status.st_mode):
        return f"Deleted the link {path} (what it pointed to is untouched)."
    return f"Deleted {path}."


@tool(needs_approval=True, effect="sends the email to {to}")
def send_email(to: str, subject: str, body: str, context: ToolContext) -> str:
    """Send an email (written as an .eml file to the workspace outbox)."""
    if "@" not in to:
        raise ToolError(f"{to!r} is not an email address")
    name = _message_file(context)
    # One file per tool call, written atomically: a retried activity rewrites
    # the same file rather than sending a second message.
    with Workspace(context.workspace) as workspace:
        workspace.write_private_file(workspace.own_folder(OUTBOX), name, bytes(_email(to, subject, body, context.session_id)))
    return f"Sent the email to {to} (saved as {OUTBOX}/{name})."


@tool(review=True)
def draft_email(to: str, subject: str, body: str, context: ToolContext) -> str:
    """Draft an email for a person to review (saved under drafts/; nothing is sent)."""
    name = _message_file(context)
    with Workspace(context.workspace) as workspace:
        workspace.write_private_file(workspace.own_folder(DRAFTS), name, bytes(_email(to, subject, body, context.session_id)))
    return f"Draft saved as {DRAFTS}/{name}:\nTo: {to}\nSubject: {subject}\n\n{body}"


@tool(needs_approval=True, effect="books a flight from {origin} to {destination} on {date}")
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


def _message_file(context: ToolContext) -> str:
    return f"{_safe(context.session_id)}--{_safe(context.call_id)}.eml"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80]
