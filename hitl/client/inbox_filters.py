"""Filters over the inbox's rows: by tool, argument values, who asked, age and session.

The API's `GET /inbox` (query parameters `tool`, `arg.<name>`, `requested_by`,
`older_than`, `session`) and `starter.py inbox` (`--tool`, `--arg k=v`, ...)
read the same filter, so a table drawn by either lists the same rows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
ARG_PREFIX = "arg."


class FilterError(ValueError):
    """A filter that cannot be read; the message names it, in one line."""


@dataclass(frozen=True)
class InboxFilter:
    """Every given condition must hold; an empty filter keeps every row."""

    tool: str | None = None
    args: Mapping[str, str] = field(default_factory=dict)
    requested_by: str | None = None
    requested_before: datetime | None = None  # `older_than`, as a moment
    session: str | None = None

    def keeps(self, item: Any) -> bool:
        """Whether the row (an InboxItem) matches every condition."""
        return ((self.tool is None or item.tool == self.tool)
                and (self.requested_by is None or item.requested_by == self.requested_by)
                and (self.session is None or item.session_id == self.session)
                and (self.requested_before is None or item.requested_at <= self.requested_before)
                and all(argument_matches(item.args, name, value) for name, value in self.args.items()))

    def kept(self, items: Iterable[Any]) -> list[Any]:
        return [item for item in items if self.keeps(item)]


def argument_matches(args: Mapping[str, Any], name: str, wanted: str) -> bool:
    """Equality on the argument's value: as JSON (`amount=50` matches 50 and 50.0, `ok=true` matches
    true) or as its string form (`path=notes.txt` matches "notes.txt")."""
    if name not in args:
        return False
    value = args[name]
    if isinstance(value, str):
        return value == wanted
    try:
        return bool(json.loads(wanted) == value)
    except ValueError:
        return json.dumps(value, ensure_ascii=False) == wanted


def moment_before(text: str, now: datetime) -> datetime:
    """`older_than` as the latest moment a call may have been asked: a duration (`90s`, `30m`,
    `2h`, `1d`) back from now, or an ISO moment (UTC when it names no zone)."""
    text = text.strip()
    if (shape := DURATION.match(text)) is not None:
        return now - timedelta(seconds=float(shape[1]) * UNIT_SECONDS[shape[2]])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise FilterError(f"older_than {text!r}: give a duration (30m, 2h, 1d) or an ISO moment "
                          "(2026-12-07T09:00:00Z)") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def argument_pair(text: str) -> tuple[str, str]:
    """`name=value` (the CLI's `--arg`)."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise FilterError(f"--arg {text!r}: write it as name=value")
    return name.strip(), value


def filter_of(*, tool: str | None = None, args: Mapping[str, str] | None = None, requested_by: str | None = None,
              older_than: str | None = None, session: str | None = None, now: datetime | None = None) -> InboxFilter:
    """The filter from its parts as written (FilterError names one that cannot be read)."""
    now = now or datetime.now(timezone.utc)
    return InboxFilter(tool=tool or None, args=dict(args or {}), requested_by=requested_by or None,
                       requested_before=moment_before(older_than, now) if older_than else None,
                       session=session or None)


def filter_from_query(params: Iterable[tuple[str, str]], now: datetime | None = None) -> InboxFilter:
    """The filter from a query string's pairs: `tool`, `arg.<name>`, `requested_by`, `older_than`,
    `session` (other parameters are not filters and are left alone)."""
    named: dict[str, str] = {}
    args: dict[str, str] = {}
    for key, value in params:
        if key.startswith(ARG_PREFIX) and len(key) > len(ARG_PREFIX):
            args[key[len(ARG_PREFIX):]] = value
        elif key in ("tool", "requested_by", "older_than", "session"):
            named[key] = value
    return filter_of(args=args, now=now, **named)
