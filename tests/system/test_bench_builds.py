"""`python -m bench.builds` at tiny sizes, run as a user runs it: this build's benches beside
another build's, one table, and no checkout of the other build left behind.

Structural facts only, never timings (this machine is shared). The other build is this very
commit, so the test does not depend on how far back a given commit's benches still run.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.stack import ROOT, product_env

FIGURES = ("one whole approve session", "approve -> tool running, one session",
           "1 sessions x 1 steps at once, steps/s", "worker CPU per step", "server CPU per step")
ROUNDS = 2


def worktrees() -> list[str]:
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=True)
    return [line for line in listed.stdout.splitlines() if line.startswith("worktree ")]


# two builds x two rounds: a process per approval run and per load run, each with its own dev server
def test_both_builds_have_every_figure_in_every_round_with_its_ratio_and_the_other_checkout_is_gone() -> None:
    before = worktrees()
    ran = subprocess.run(
        [sys.executable, "-m", "bench.builds", "--against", "HEAD", "--rounds", str(ROUNDS), "--sessions", "1",
         "--load-sessions", "1", "--tool-steps", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env=product_env(PYTHONPATH=str(ROOT)),
    )

    assert ran.returncode == 0, ran.stderr[-3000:]
    assert worktrees() == before, "the other build's checkout is removed afterwards"
    rows = [line for line in ran.stdout.splitlines() if line.startswith("| ") and not line.startswith("| figure ")]
    for figure in FIGURES:
        mine = [row for row in rows if row.startswith(f"| {figure} |")]
        runs = [row.split(" | ")[1] for row in mine]
        assert runs == [*(str(n) for n in range(1, ROUNDS + 1)), "median"], f"{figure}: {mine}"
        assert all(re.search(r"\| x\d+\.\d\d \|", row) for row in mine), f"every round is a ratio: {mine}"
    assert len(rows) == len(FIGURES) * (ROUNDS + 1), rows
