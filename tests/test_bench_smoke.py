"""The benchmark's long-turn comparison, at tiny sizes: it runs, and it says what it must.

Structural facts only, never timings (this machine is shared): a row for each
design and size, every turn reached its last step, the history is summed over
the session's runs, and at 20 steps the product stores less per step than the
raw floor, whose every model call re-sends the whole conversation.
"""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

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
