"""How people decide, as `starter.py stats` prints it: one table per tool, policy rule, door and person.

The figures are hitl/client/decision_stats.py's (read by hitl/client/decisions.py); this is only
how a terminal shows them.
"""

from __future__ import annotations

from hitl.client.decision_stats import Figures, PersonFigures
from hitl.client.decisions import StatsRead

COLUMNS = ("REQUESTED", "APPROVED", "EDITED", "REJECTED", "TIMED OUT", "P50 S", "P95 S")


def seconds_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def row_cells(figures: Figures) -> list[str]:
    return [str(figures.requested), str(figures.approved), str(figures.edited), str(figures.rejected),
            str(figures.timed_out), seconds_text(figures.decide_seconds_p50), seconds_text(figures.decide_seconds_p95)]


def table(title: str, rows: dict[str, Figures], flag_rubber_stamps: bool = False) -> list[str]:
    """A titled table, its columns as wide as their widest cell."""
    header = [title.upper(), *COLUMNS, *(["RUBBER STAMP"] if flag_rubber_stamps else [])]
    body = []
    for name, figures in rows.items():
        cells = [name, *row_cells(figures)]
        if flag_rubber_stamps:
            cells.append("yes" if isinstance(figures, PersonFigures) and figures.rubber_stamp else "")
        body.append(cells)
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [header, *body]]


def render_stats(stats: StatsRead) -> str:
    since = stats.since.isoformat() if stats.since else "the start"
    until = stats.until.isoformat() if stats.until else "now"
    lines = [f"decisions from {since} until {until}, in {stats.sessions} sessions"
             + ("" if stats.complete else " (more sessions were active: only these were read)")]
    if not stats.tools and not stats.people:
        return lines[0] + "\nnothing waited for a person in this period"
    lines += ["", *table("total", {"all": stats.total})]
    for title, rows in (("tool", stats.tools), ("rule", stats.rules), ("door", stats.doors)):
        lines += ["", *table(title, dict(rows))]
    lines += ["", *table("person", dict(stats.people), flag_rubber_stamps=True)]
    thresholds = stats.rubber_stamp
    lines.append(f"rubber stamp: at least {thresholds.min_decisions} decisions, {thresholds.approve_rate:.0%} approved "
                 f"unchanged, half in {thresholds.median_seconds:g} s or less (the policy's rubber_stamp)")
    if stats.unreadable:
        lines.append(f"not read: {', '.join(stats.unreadable)}")
    return "\n".join(lines)
