"""Receipts of side effects, so a retried activity reports what it already did.

A receipt is written *before* the effect: if the worker dies between the two,
the retry sees the receipt and the effect's trace (a file gone, a file written)
and reports success instead of doing it again or failing.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from activities.tools.workspace import STATE_FOLDER, Workspace

SCHEMA = """
CREATE TABLE IF NOT EXISTS receipts (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
)
"""


RECEIPTS_DB = "receipts.sqlite"


def _open(workspace: Path) -> sqlite3.Connection:
    """The receipts database in .hitl/ (0700), itself 0600, never reached through a link."""
    with Workspace(workspace) as opened:
        db = opened.connect_database(STATE_FOLDER, RECEIPTS_DB)
    db.execute(SCHEMA)
    return db


def write_receipt(workspace: Path, session_id: str, call_id: str, tool: str, detail: str) -> None:
    with closing(_open(workspace)) as db, db:
        db.execute("INSERT OR IGNORE INTO receipts VALUES (?, ?, ?, ?)", (session_id, call_id, tool, detail))


def has_receipt(workspace: Path, session_id: str, call_id: str) -> bool:
    with closing(_open(workspace)) as db:
        row = db.execute(
            "SELECT 1 FROM receipts WHERE session_id = ? AND call_id = ?", (session_id, call_id)
        ).fetchone()
    return row is not None


def remove_receipt(workspace: Path, session_id: str, call_id: str) -> None:
    """The call was answered (an MCP server's input_required): it is no longer in doubt."""
    with closing(_open(workspace)) as db, db:
        db.execute("DELETE FROM receipts WHERE session_id = ? AND call_id = ?", (session_id, call_id))
