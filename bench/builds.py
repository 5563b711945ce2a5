"""This build's benches beside a previous build's, in one command.

    python -m bench.builds [--against cc7bbd6] [--rounds 3] [--sessions 20]
                           [--load-sessions 40] [--tool-steps 10]

The other build (`--against`, any git revision; by default the code before
AgentWorkflow was composed of parts) is checked out into a temporary
`git worktree`, removed afterwards, also when a bench fails or the command is
interrupted. Each round runs each build's *own* bench code, in a process of its
own with that build's checkout first on PYTHONPATH (the same venv), the builds
alternating which goes first:

1. bench/approval_run.py, as bench/table.py runs it: `--sessions` approve
   sessions one after another; the median whole session (start to the answer
   seen) and approve -> tool running;
2. bench/throughput.py's `run`, the product alone: `--load-sessions` sessions x
   `--tool-steps` tool steps at once on one worker process; steps/s, and the
   worker's and the server's CPU per step.

Both builds' dev servers run with this build's server settings (the transfer
queue's read rate of hitl/devserver.py), so what is compared is the code.

One table: each figure, each round's value for this build and the other, their
ratio (this / other: below x1.00 is less time or CPU, above x1.00 more steps/s),
and the median of the rounds' ratios. Beside each: the counts that explain a
difference (events, workflow tasks, round trips), and for the approval the
engine's floor (bench/raw_agent.py's RawAgent) measured in the same processes,
whose ratio is the machine's own noise between the two builds' runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator

from bench.process_figures import load_average
from bench.table import row

ROOT = Path(__file__).resolve().parent.parent
PREVIOUS = "cc7bbd6"  # the code before AgentWorkflow was composed of parts
THIS, OTHER = "this", "other"
BENCH_TIMEOUT_SECONDS = 1_800
STOP_SECONDS = 60  # told to stop, a bench stops its worker and dev server before it leaves

# Every dev server either build's benches start gets this build's server settings as well
# (hitl/devserver.py's TRANSFER_QUEUE_FLAGS, given again after the build's own), so a setting of
# the server is not counted as a difference of the code. Put in place before any bench module
# imports start_dev_server.
SAME_SERVER = """\
import json, os
import hitl.devserver as devserver
_flags = json.loads(os.environ["HITL_BENCH_SERVER_FLAGS"])
_start = devserver.start_dev_server
def _with_flags(*args, extra_args=(), **kwargs):
    return _start(*args, extra_args=(*_flags, *extra_args), **kwargs)
devserver.start_dev_server = _with_flags
"""
APPROVAL_RUN = SAME_SERVER + """\
import runpy, sys
sys.argv[0] = "bench.approval_run"
runpy.run_module("bench.approval_run", run_name="__main__", alter_sys=True)
"""

# bench/throughput.py's `run` (the same signature and figures in every build since issue 31),
# the product alone, one round, its figures as JSON: its own table is for people.
LOAD_RUN = SAME_SERVER + """\
import asyncio, json, sys
from bench import throughput
from hitl.exit_cleanly import exit_now
[phase] = asyncio.run(throughput.run(int(sys.argv[1]), int(sys.argv[2]), rounds=1, designs=("product",)))
print(json.dumps({**phase.figures, "workflow_tasks/step": phase.workflow_tasks,
                  "finished": phase.finished, "sessions": phase.sessions}))
exit_now(0)
"""


# ------------------------------------------------------------------ the other build's checkout


def git(*arguments: str, check: bool = True) -> str:
    done = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(arguments)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """The revision in a temporary worktree of this repository, gone when the block ends however it ends."""
    folder = Path(tempfile.mkdtemp(prefix="bench-builds-"))
    path = folder / "checkout"
    try:
        git("worktree", "add", "--detach", "--quiet", str(path), revision)
        yield path
    finally:
        git("worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(folder, ignore_errors=True)
        git("worktree", "prune", check=False)


def commit_of(revision: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", "--short", f"{revision}^{{commit}}")
    except RuntimeError:
        raise RuntimeError(f"--against {revision}: no such commit in {ROOT}") from None


# ------------------------------------------------------------------ one bench process of one build


def environment(checkout_root: Path) -> dict[str, str]:
    """Ours, with only that checkout on PYTHONPATH: the venv's editable install points at another tree,
    and a module one build lacks must not be found in the other."""
    from hitl.devserver import TRANSFER_QUEUE_FLAGS

    return {**os.environ, "PYTHONPATH": str(checkout_root), "HITL_BENCH_SERVER_FLAGS": json.dumps(TRANSFER_QUEUE_FLAGS)}


def run_bench(checkout_root: Path, bench: str, command: list[str], logs: Path) -> dict[str, Any]:
    """Run one bench process (`bench` names it) from `checkout_root` and read the JSON object it prints last."""
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / "stdout", logs / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        # Its own session: a Ctrl-C here reaches it through `stop`, which lets it clean up first.
        process = subprocess.Popen(command, cwd=checkout_root, env=environment(checkout_root), stdout=stdout,
                                   stderr=stderr, text=True, start_new_session=True)
        try:
            process.wait(timeout=BENCH_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            stop(process)
            raise RuntimeError(f"{bench} from {checkout_root} did not finish within "
                               f"{BENCH_TIMEOUT_SECONDS} s: {err.read_text().strip()[-2000:]}") from None
        except BaseException:
            stop(process)
            raise
    if process.returncode != 0:
        raise RuntimeError(f"{bench} from {checkout_root} exited with {process.returncode}: "
                           f"{err.read_text().strip()[-2000:]}")
    return json.loads(out.read_text().strip().splitlines()[-1])


def stop(process: subprocess.Popen[str]) -> None:
    """SIGINT, as a Ctrl-C: the bench stops its worker and its dev server (own session) in its finally blocks."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# ------------------------------------------------------------------ the rounds


@dataclass
class Round:
    number: int  # from 1
    first: str  # which build ran first
    approval: dict[str, dict[str, Any]]  # build -> bench/approval_run.py's JSON (product and floor)
    load: dict[str, dict[str, float]]  # build -> the product's throughput figures


def one_round(number: int, builds: dict[str, Path], args: argparse.Namespace, logs: Path) -> Round:
    order = [THIS, OTHER] if number % 2 else [OTHER, THIS]
    floor_first = not number % 2
    approval_command = [sys.executable, "-c", APPROVAL_RUN, "--sessions", str(args.sessions),
                        *(["--floor-first"] if floor_first else [])]
    approval = {build: run_bench(builds[build], "bench/approval_run.py", approval_command,
                                 logs / f"{number}-{build}-approval") for build in order}
    load_command = [sys.executable, "-c", LOAD_RUN, str(args.load_sessions), str(args.tool_steps)]
    load = {build: run_bench(builds[build], "bench/throughput.py", load_command, logs / f"{number}-{build}-load")
            for build in order}
    for build, figures in load.items():
        if figures["finished"] != figures["sessions"]:
            raise RuntimeError(f"round {number}, {build} build: {figures['finished']:.0f} of "
                               f"{figures['sessions']:.0f} sessions finished under load")
    return Round(number, order[0], approval, load)


def measure(args: argparse.Namespace) -> list[Round]:
    with tempfile.TemporaryDirectory(prefix="bench-builds-logs-") as logs, checkout(args.against) as other:
        builds = {THIS: ROOT, OTHER: other}
        return [one_round(number, builds, args, Path(logs)) for number in range(1, args.rounds + 1)]


# ------------------------------------------------------------------ the table


@dataclass
class Figure:
    name: str
    unit: str
    value: Callable[[Round, str], float]
    beside: Callable[[Round], str]


def session_median(key: str, design: str = "product") -> Callable[[Round, str], float]:
    return lambda found, build: statistics.median(found.approval[build][design][key])


def approval_beside(key: str) -> Callable[[Round], str]:
    def beside(found: Round) -> str:
        mine, theirs = found.approval[THIS]["product"], found.approval[OTHER]["product"]
        floor = session_median(key, "floor")
        return (f"{mine['events']:.0f} / {theirs['events']:.0f} events, {mine['workflow_tasks']:.0f} / "
                f"{theirs['workflow_tasks']:.0f} wf tasks, {mine['requests']:.1f} / {theirs['requests']:.1f} "
                f"round trips per session; RawAgent in the same runs "
                f"{floor(found, THIS):.1f} / {floor(found, OTHER):.1f} ms")
    return beside


def load_figure(key: str) -> Callable[[Round, str], float]:
    return lambda found, build: found.load[build][key]


def load_beside(found: Round) -> str:
    mine, theirs = found.load[THIS], found.load[OTHER]
    return (f"{mine['events/step']:.1f} / {theirs['events/step']:.1f} events, {mine['workflow_tasks/step']:.1f} / "
            f"{theirs['workflow_tasks/step']:.1f} wf tasks, {mine['requests/step']:.1f} / "
            f"{theirs['requests/step']:.1f} round trips per step")


def figures(args: argparse.Namespace) -> list[Figure]:
    return [
        Figure("one whole approve session", "ms", session_median("session_ms"), approval_beside("session_ms")),
        Figure("approve -> tool running, one session", "ms", session_median("approve_to_tool_ms"),
               approval_beside("approve_to_tool_ms")),
        Figure(f"{args.load_sessions} sessions x {args.tool_steps} steps at once, steps/s", "",
               load_figure("steps/s"), load_beside),
        Figure("worker CPU per step", "ms", load_figure("worker CPU ms/step"), load_beside),
        Figure("server CPU per step", "ms", load_figure("server CPU ms/step"), load_beside),
    ]


def figure_rows(figure: Figure, rounds: list[Round]) -> list[str]:
    lines = []
    for found in rounds:
        lines.append(row(figure.name, str(found.number), figure.value(found, THIS), figure.value(found, OTHER),
                         figure.unit, figure.beside(found) + f"; {found.first} build first"))
    mine = statistics.median(figure.value(found, THIS) for found in rounds)
    theirs = statistics.median(figure.value(found, OTHER) for found in rounds)
    ratio = statistics.median(figure.value(found, THIS) / figure.value(found, OTHER) for found in rounds)
    lines.append(f"| {figure.name} | median | {mine:.1f} {figure.unit} | {theirs:.1f} {figure.unit} | x{ratio:.2f} | "
                 f"the ratio is the median of the rounds' ratios |")
    return lines


def table(rounds: list[Round], args: argparse.Namespace, this: str, other: str, load: str) -> str:
    lines = [f"| figure | round | this build ({this}) | {other} | this / {other} | beside: this / {other} |",
             "|---|---|---|---|---|---|"]
    for figure in figures(args):
        lines += figure_rows(figure, rounds)
    lines += ["", f"{args.sessions} approve sessions per build and round (the median of each); the load: "
              f"{args.load_sessions} sessions x {args.tool_steps} tool steps at once, the product alone, "
              f"a fresh dev server and worker process per build and round", f"load average before / after: {load}"]
    return "\n".join(lines)


# ------------------------------------------------------------------ the command


def interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # a SIGTERM leaves through the same clean-up as a Ctrl-C


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=PREVIOUS, help="the other build: a git revision")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating which build goes first")
    parser.add_argument("--sessions", type=int, default=20, help="approve sessions per build and round")
    parser.add_argument("--load-sessions", type=int, default=40, help="sessions at once under load")
    parser.add_argument("--tool-steps", type=int, default=10, help="tool steps per session under load")
    args = parser.parse_args()
    if min(args.rounds, args.sessions, args.load_sessions, args.tool_steps) < 1:
        parser.error("--rounds, --sessions, --load-sessions and --tool-steps are at least 1")
    signal.signal(signal.SIGTERM, interrupted)
    try:
        this, other = git("rev-parse", "--short", "HEAD"), commit_of(args.against)
        if git("status", "--porcelain", "--untracked-files=no"):
            this += " with uncommitted changes"
        before = load_average()
        rounds = measure(args)
    except RuntimeError as failure:
        print(f"bench.builds: {failure}", file=sys.stderr)
        return 1
    print(table(rounds, args, this, other, f"{before} / {load_average()}"))
    return 0


if __name__ == "__main__":
    from hitl.exit_cleanly import exit_with

    exit_with(main)
