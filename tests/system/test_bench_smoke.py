"""The benchmarks at tiny sizes: they run, and they say what they must.

Structural facts only, never timings (this machine is shared): a row for each
design and size (a delegating session's child counted with its root), every turn
reached its last step, the history is summed over the session's runs, and at 20
steps the product stores less per step than the raw floor, whose every model
call re-sends the whole conversation. Issue 31's
table (bench/table.py) has a figure for every approval run, load round and door,
each with its counts beside it and as a ratio to its baseline.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from bench import doors, throughput
from bench import table as issue_table
from bench.history import compare_long_turns, overheads_by_design, table

SIZES = (5, 20)
TEXT_BYTES = 5_000


async def test_the_long_turn_table_has_every_row_and_the_product_stores_less_per_step_than_the_raw_floor(
    env: WorkflowEnvironment, workspace: Path,
) -> None:
    turns = await compare_long_turns(env.client, workspace, SIZES, TEXT_BYTES)

    by_row = {(turn.design, turn.steps): turn for turn in turns}
    assert sorted(by_row) == [("product", 5), ("product", 20), ("raw floor", 5), ("raw floor", 20)]
    for turn in turns:
        assert turn.reached == turn.steps, f"{turn.design} stopped at step {turn.reached} of {turn.steps}: {turn.outcome}"
        assert turn.outcome in ("idle", "completed")
        assert turn.runs >= 1 and turn.events > 0
        assert turn.new_content_bytes > (turn.steps - 1) * TEXT_BYTES, "the model's text is part of what is new"
    assert by_row[("product", 20)].bytes_per_step < by_row[("raw floor", 20)].bytes_per_step

    overheads = overheads_by_design(turns, SIZES)
    assert all(overheads[design][step] is not None for design in ("product", "raw floor") for step in SIZES)
    printed = table(turns, TEXT_BYTES).splitlines()
    assert sum(line.startswith(("product ", "raw floor ")) for line in printed) == 4


# its own dev server and a worker process per design
async def test_the_throughput_table_has_every_design_and_every_session_finished() -> None:
    phases = await throughput.run(sessions=2, tool_steps=2, rounds=1, designs=(*throughput.DESIGNS, "delegating"))

    assert [phase.design for phase in phases] == ["product", "unsandboxed", "floor", "delegating"]
    for phase in phases:
        assert phase.finished == phase.sessions, f"{phase.design}: {phase.finished} of {phase.sessions} turns ended"
        delegations = phase.sessions if phase.design == "delegating" else 0  # the root's hand-over and answer
        assert phase.events["activity_task_scheduled"] == phase.sessions * (2 * phase.tool_steps + 1) + 2 * delegations
        assert phase.events["child_workflow_execution_completed"] == delegations, "each child's history counted too"
        assert phase.events["workflow_execution_started"] == phase.sessions + delegations
        assert phase.worker_cpu > 0 and phase.server_cpu > 0, "CPU time read from /proc"
        assert phase.requests["RespondActivityTaskCompleted"] > 0, "the server's counters were read"
        assert len(phase.overheads) == phase.sessions * phase.tool_steps, "every step's overhead, from the worker"
    printed = throughput.table(phases, "0 0 0").splitlines()
    assert printed[2].startswith("product ") and printed[3].startswith("unsandboxed ") and printed[4].startswith("floor ")
    assert "(x" in printed[2] and "(x" in printed[3], "the product is given as a ratio to the floor"
    assert printed[5].startswith("delegating ") and " product)" in printed[5], "a delegation, as a ratio to the product"
    assert printed[-1].startswith("delegating / product, round 1: steps/s ")


# its own dev servers, a process per approval run and per worker, the API, a loopback Slack and SMTP server, an MCP server
async def test_the_issue_table_has_every_figure_of_every_run_and_every_door() -> None:
    sizes = argparse.Namespace(runs=2, sessions=1, load_sessions=1, tool_steps=1, load_rounds=1,
                               door_rounds=1, decisions=1, think_seconds=0)
    runs, phases, rounds = await issue_table.measure(sizes)

    assert len(runs) == 2
    for run in runs:
        assert sorted(run) == ["floor", "product"]
        for design in run.values():
            assert len(design["approve_to_tool_ms"]) == len(design["session_ms"]) == 1
            assert design["events"] > 0 and design["workflow_tasks"] > 0 and design["requests"] > 0
    assert [phase.design for phase in phases] == ["product", "floor"]
    assert all(phase.finished == phase.sessions for phase in phases)
    assert [door_round.door for door_round in rounds] == list(doors.DOORS)
    for door_round in rounds:
        [decision] = door_round.decisions
        assert decision.seconds > 0 and math.isfinite(decision.tool_seconds), f"{door_round.door}: {decision}"
        assert decision.events > 0 and decision.workflow_tasks > 0 and door_round.requests_per_decision > 0
    printed = issue_table.table(runs, phases, rounds, 0, "0 0 0").splitlines()
    rows = [line for line in printed[2:] if line.startswith("| ")]
    assert len(rows) == 2 * 2 + 3 + len(doors.DOORS) - 1, "each approval figure per run, each load figure, each door but the baseline"
    assert all(" | x" in line for line in rows), "every figure is given as a ratio"
