"""The benchmarks at tiny sizes, run as a user runs them (`python -m bench.X`): they finish, and
their tables say what they must.

Structural facts only, never timings (this machine is shared): a row for each design and size
(a delegating session's child counted with its root), every turn reached its last step, the
history is summed over the session's runs, and at 20 steps the product stores less per step than
the raw floor, whose every model call re-sends the whole conversation. Issue 31's table
(bench/table.py) has a figure for every approval run, load round and door, each with its counts
beside it and as a ratio to its baseline.

Each benchmark runs in a process of its own and only its printed output is read: no test imports
bench/.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

from tests.support.stack import product_env

ROOT = Path(__file__).resolve().parents[2]
BENCH_SECONDS = 900  # the issue table at its smallest runs several dev servers and a process per run
SIZES = (5, 20)
TEXT_BYTES = 5_000
TOOL_STEPS = 2
COLUMNS = re.compile(r"\s{2,}")  # a plain table's columns are padded apart; a cell has single spaces


def bench(module: str, *args: str) -> str:
    """What `python -m bench.<module> <args>` prints, run from this checkout."""
    ran = subprocess.run([sys.executable, "-m", f"bench.{module}", *args], cwd=ROOT, env=product_env(),
                         capture_output=True, text=True, timeout=BENCH_SECONDS)
    assert ran.returncode == 0, f"bench.{module} exited with {ran.returncode}: {ran.stderr.strip()[-3000:]}"
    return ran.stdout


def plain_rows(printed: str) -> list[dict[str, str]]:
    """The rows of a plain table (a header, a line of dashes, one line a row, then a blank line)."""
    header, _, *lines = printed.splitlines()
    names = COLUMNS.split(header.strip())
    rows = []
    for line in lines:
        if not line.strip():
            break
        cells = COLUMNS.split(line.strip())
        assert len(cells) == len(names), f"a row whose cells are not the header's: {line!r}"
        rows.append(dict(zip(names, cells)))
    return rows


def number(cell: str) -> float:
    """The figure a cell starts with: `6,364` -> 6364.0, `17.8 (x1.08)` -> 17.8."""
    return float(cell.split()[0].replace(",", ""))


def counts(line: str) -> dict[str, float]:
    """`product: events per session: workflow_task_scheduled 6.0, ...` as {name: count}."""
    listed = line.split(": ", 2)[2]
    return {name: float(count) for name, count in (item.rsplit(" ", 1) for item in listed.split(", "))}


def test_the_long_turn_table_has_every_row_and_the_product_stores_less_per_step_than_the_raw_floor() -> None:
    printed = bench("history", "--sizes", *map(str, SIZES), "--text-bytes", str(TEXT_BYTES))

    by_row = {(row["design"], int(row["steps"])): row for row in plain_rows(printed)}
    assert sorted(by_row) == [("product", 5), ("product", 20), ("raw floor", 5), ("raw floor", 20)], printed
    for (design, steps), row in by_row.items():
        assert int(row["reached"]) == steps, f"{design} stopped at step {row['reached']} of {steps}: {row['outcome']}"
        assert row["outcome"] in ("idle", "completed")
        assert int(row["runs"]) >= 1 and number(row["events"]) > 0
        assert number(row["new/step"]) * steps > (steps - 1) * TEXT_BYTES, "the model's text is part of what is new"
        assert row["overhead ms"] != "-", f"{design}: no step overhead near step {steps}"
    assert number(by_row[("product", 20)]["bytes/step"]) < number(by_row[("raw floor", 20)]["bytes/step"])


# its own dev server and a worker process per design
def test_the_throughput_table_has_every_design_and_every_session_finished() -> None:
    designs = ("product", "unsandboxed", "floor", "delegating")
    printed = bench("throughput", "--sessions", "2", "--tool-steps", str(TOOL_STEPS), "--rounds", "1",
                    "--designs", *designs)

    rows = plain_rows(printed)
    assert [row["design"] for row in rows] == list(designs), printed
    for row in rows:
        assert number(row["worker CPU ms/step"]) > 0 and number(row["server CPU ms/step"]) > 0, "CPU time read from /proc"
    by_design = {row["design"]: row for row in rows}
    assert all("(x" in by_design[design]["steps/s"] for design in ("product", "unsandboxed")), "a ratio to the floor"
    assert " product)" in by_design["delegating"]["steps/s"], "a delegation, as a ratio to the product"

    lines = printed.splitlines()
    [done] = [line for line in lines if line.startswith("sessions done per phase: ")]
    assert done == "sessions done per phase: " + ", ".join(f"{design} 2/2" for design in designs)
    for design in designs:
        events = counts(next(line for line in lines if line.startswith(f"{design}: events per session: ")))
        delegations = 1 if design == "delegating" else 0  # the root's hand-over and answer
        assert events["activity_task_scheduled"] == 2 * TOOL_STEPS + 1 + 2 * delegations, (design, events)
        assert events.get("child_workflow_execution_completed", 0) == delegations, "each child's history counted too"
        assert events["workflow_execution_started"] == 1 + delegations, (design, events)
        requests = counts(next(line for line in lines if line.startswith(f"{design}: requests per step: ")))
        assert requests["RespondActivityTaskCompleted"] > 0, "the server's counters were read"
        overhead = next(line for line in lines if line.startswith(f"{design}: step overhead p50 "))
        assert "nan" not in overhead, f"every step's overhead, from the worker: {overhead}"
    assert lines[-1].startswith("delegating / product, round 1: steps/s ")


# its own dev servers, a process per approval run and per worker, the API, a loopback Slack and SMTP server, an MCP server
def test_the_issue_table_has_every_figure_of_every_run_and_every_door() -> None:
    doors = re.findall(r"--doors \{([^}]*)\}", bench("doors", "--help"))[0].split(",")
    printed = bench("table", "--runs", "2", "--sessions", "1", "--load-sessions", "1", "--tool-steps", "1",
                    "--load-rounds", "1", "--door-rounds", "1", "--decisions", "1", "--think-seconds", "0")

    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in printed.splitlines()[2:]
            if line.startswith("| ")]
    assert len(rows) == 2 * 2 + 3 + len(doors) - 1, "each approval figure per run, each load figure, each door but the baseline"
    assert all(ratio.startswith("x") for _, _, _, _, ratio, _ in rows), "every figure is given as a ratio"
    approvals, door_rows = rows[:4], rows[7:]
    assert sorted(run for _, run, *_ in approvals) == ["1 (1 sessions)", "1 (1 sessions)", "2 (1 sessions)", "2 (1 sessions)"]
    for figure, run, product, floor, _, beside in approvals + door_rows:
        assert number(product) > 0 and number(floor) > 0, f"{figure}, run {run}: {product} against {floor}"
        events, tasks, requests = (float(n) for n in re.findall(r"(\d+(?:\.\d+)?) / \d+(?:\.\d+)? ", beside)[:3])
        assert events > 0 and tasks > 0 and requests > 0, f"{figure}: {beside}"
    assert len({figure for figure, *_ in door_rows}) == len(doors) - 1, "a row for each door but the API's"
    for figure, run, *_, beside in door_rows:
        assert run == "1 (1 decisions)", figure
        assert math.isfinite(float(beside.rsplit(": x", 1)[1])), f"{figure}: the tool ran: {beside}"
    assert any(line.startswith("API approve -> SSE tool_result, the doors' baseline, each round: ")
               for line in printed.splitlines())
