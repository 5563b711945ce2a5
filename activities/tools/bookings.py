"""Flight bookings in a SQLite file, exactly once per tool call.

The key is the session id and the tool call id, so an activity that is retried
after a crash finds the booking it already made instead of making another.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from activities.tools.workspace import BOOKINGS_DB, Workspace

SCHEMA = """
CREATE TABLE IF NOT EXISTS bookings (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    reference TEXT NOT NULL,
    origin TEXT NOT NULL,
    destination TEXT NOT NULL,
    date TEXT NOT NULL,
    booked_at TEXT NOT NULL DEFAULT (datetime('now')),
    PRIMARY KEY (session_id, call_id)
)
"""


@dataclass(frozen=True)
class Booking:
    reference: str
    origin: str
    destination: str
    date: str


def bookings_file(workspace: Path) -> Path:
    return workspace / BOOKINGS_DB


def book_once(workspace: Path, session_id: str, call_id: str, origin: str, destination: str, date: str) -> Booking:
    reference = "HITL-" + hashlib.sha256(f"{session_id}/{call_id}".encode()).hexdigest()[:6].upper()
    with Workspace(workspace) as opened:
        connection = opened.connect_database(None, BOOKINGS_DB)  # 0600, never through a link
    with closing(connection) as db, db:
        db.execute(SCHEMA)
        db.execute(
            "INSERT OR IGNORE INTO bookings (session_id, call_id, reference, origin, destination, date)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, call_id, reference, origin, destination, date),
        )
        row = db.execute(
            "SELECT reference, origin, destination, date FROM bookings WHERE session_id = ? AND call_id = ?",
            (session_id, call_id),
        ).fetchone()
    return Booking(*row)


def all_bookings(workspace: Path) -> list[Booking]:
    path = bookings_file(workspace)
    if not path.exists():
        return []
    with closing(sqlite3.connect(path)) as db:
        db.execute(SCHEMA)
        rows = db.execute("SELECT reference, origin, destination, date FROM bookings ORDER BY booked_at").fetchall()
    return [Booking(*row) for row in rows]
