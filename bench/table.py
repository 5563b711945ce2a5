"""Issue 31's table in one command: the approval path, throughput and CPU, and each door, as ratios.

    python -m bench.table [--runs 4] [--sessions 20] [--load-sessions 40] [--tool-steps 10]
                          [--load-rounds 3] [--door-rounds 3] [--decisions 5] [--think-seconds 2]

Three benchmarks that exist, run in turn, every figure a ratio against a
baseline measured in the same run, and every run's figure printed (a bimodal
figure shows as two clusters, not one mean):

1. `--runs` runs of bench/approval_run.py, each a process of its own (product
   and floor alternate which goes first): approve -> tool running and the whole
   approve session, the median of `--sessions` each, against RawAgent;
2. bench/throughput.py, product against the floor (RawLongAgent), `--load-rounds`
   alternating rounds of `--load-sessions` sessions x `--tool-steps` steps at once:
   steps/s, worker and server CPU per step, each round;
3. bench/doors.py: a decision through the API (POST approve -> `tool_result` on the
   session's event stream), AG-UI, A2A, Slack, a sub-agent's pause decided at its
   root, a mail's link and an MCP server's question answered, against the API's, each round.

Beside the times: events, workflow tasks and the server frontend's round trips
per session (1, 3) or per tool step (2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import doors, throughput
from bench.process_figures import load_average

ROOT = Path(__file__).resolve().parent.parent
DOOR_FIGURES = {"ag-ui": "AG-UI resume -> TOOL_CALL_RESULT", "a2a": "A2A decision -> completed task",
                "slack": "Slack click -> SSE tool_result",
                "sub-agent": "Sub-agent: approve at the root -> the delegation's SSE tool_result",
                "email": "Mail link POST /decide/<token> -> SSE tool_result",
                "elicitation": "MCP elicitation: answer the form -> the retried tool's SSE tool_result"}


def approval_command(sessions: int, floor_first: bool) -> list[str]:
    """One run of bench/approval_run.py, a process of its own; it prints one JSON object last."""
    return [sys.executable, "-m", "bench.approval_run", "--sessions", str(sessions),
            *(["--floor-first"] if floor_first else [])]


def approval_runs(runs: int, sessions: int) -> list[dict[str, Any]]:
    found = []
    for run_no in range(runs):
        done = subprocess.run(approval_command(sessions, floor_first=bool(run_no % 2)), cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"bench.approval_run failed: {done.stderr.strip()[-2000:]}")
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return found


def row(figure: str, run: str, product: float, floor: float, unit: str, beside: str) -> str:
    return f"| {figure} | {run} | {product:.1f} {unit} | {floor:.1f} {unit} | x{product / floor:.2f} | {beside} |"


def approval_rows(runs: list[dict[str, Any]]) -> list[str]:
    lines = []
    for name, key in (("approve -> tool running, one session", "approve_to_tool_ms"),
                      ("one whole approve session", "session_ms")):
        for number, found in enumerate(runs, 1):
            product, floor = found["product"], found["floor"]
            beside = (f"{product['events']:.0f} / {floor['events']:.0f} events, {product['workflow_tasks']:.0f} / "
                      f"{floor['workflow_tasks']:.0f} wf tasks, {product['requests']:.1f} / "
                      f"{floor['requests']:.1f} round trips per session")
            lines.append(row(name, f"{number} ({len(product[key])} sessions)", statistics.median(product[key]),
                             statistics.median(floor[key]), "ms", beside))
    return lines


def load_rows(phases: list[throughput.Phase]) -> list[str]:
    lines = []
    products = [p for p in phases if p.design == "product"]
    floors = [p for p in phases if p.design == "floor"]
    for name, key, unit in (("{n} sessions x {m} steps at once, steps/s", "steps/s", ""),
                            ("worker CPU per step", "worker CPU ms/step", "ms"),
                            ("server CPU per step", "server CPU ms/step", "ms")):
        for number, (product, floor) in enumerate(zip(products, floors), 1):
            mine, theirs = product.figures, floor.figures
            beside = (f"{mine['events/step']:.1f} / {theirs['events/step']:.1f} events, "
                      f"{product.workflow_tasks:.1f} / {floor.workflow_tasks:.1f} wf tasks, {mine['requests/step']:.1f} / "
                      f"{theirs['requests/step']:.1f} round trips per step")
            label = name.format(n=product.sessions, m=product.tool_steps)
            lines.append(row(label, str(number), mine[key], theirs[key], unit, beside))
    return lines


def door_rows(rounds: list[doors.DoorRound]) -> list[str]:
    lines = []
    for door in [d for d in dict.fromkeys(r.door for r in rounds) if d != "api"]:
        for mine in (r for r in rounds if r.door == door):
            [api] = [r for r in rounds if r.door == "api" and r.round_no == mine.round_no]
            beside = (f"{mine.median('events'):.0f} / {api.median('events'):.0f} events, "
                      f"{mine.median('workflow_tasks'):.0f} / {api.median('workflow_tasks'):.0f} wf tasks, "
                      f"{mine.requests_per_decision:.1f} / {api.requests_per_decision:.1f} round trips per decision; "
                      f"to the tool done (history): x{mine.median('tool_seconds') / api.median('tool_seconds'):.2f}")
            lines.append(f"| {DOOR_FIGURES[door]}, against API approve -> SSE tool_result | "
                         f"{mine.round_no + 1} ({len(mine.decisions)} decisions) | "
                         f"{mine.median('seconds') * 1000:.0f} ms | {api.median('seconds') * 1000:.0f} ms | "
                         f"x{mine.median('seconds') / api.median('seconds'):.2f} | {beside} |")
    return lines


async def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[throughput.Phase], list[doors.DoorRound]]:
    runs = approval_runs(args.runs, args.sessions)
    phases = await throughput.run(args.load_sessions, args.tool_steps, args.load_rounds, designs=("product", "floor"))
    rounds = await doors.run(args.door_rounds, args.decisions, args.think_seconds)
    return runs, phases, rounds


def table(runs: list[dict[str, Any]], phases: list[throughput.Phase], rounds: list[doors.DoorRound],
          think: float, load: str) -> str:
    lines = ["| figure | run | product | floor (baseline) | ratio | beside: product / floor |", "|---|---|---|---|---|---|",
             *approval_rows(runs), *load_rows(phases), *door_rows(rounds)]
    lines += ["", f"API approve -> SSE tool_result, the doors' baseline, each round: "
              + ", ".join(f"{r.median('seconds') * 1000:.0f} ms" for r in rounds if r.door == "api")
              + f" (the decision sent {think:g} s after the card was shown, the event stream open); the same "
              f"decisions' approve -> tool done (its history's ActivityTaskCompleted): "
              + ", ".join(f"{r.median('tool_seconds') * 1000:.0f} ms" for r in rounds if r.door == "api"),
              f"load average before / after: {load}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="approval runs, each a process of its own")
    parser.add_argument("--sessions", type=int, default=20, help="approve sessions per design and run")
    parser.add_argument("--load-sessions", type=int, default=40)
    parser.add_argument("--tool-steps", type=int, default=10)
    parser.add_argument("--load-rounds", type=int, default=3)
    parser.add_argument("--door-rounds", type=int, default=3)
    parser.add_argument("--decisions", type=int, default=5, help="decisions per door and round")
    parser.add_argument("--think-seconds", type=float, default=2.0)
    args = parser.parse_args()
    before = load_average()
    runs, phases, rounds = asyncio.run(measure(args))
    print(table(runs, phases, rounds, args.think_seconds, f"{before} / {load_average()}"))


if __name__ == "__main__":
    main()
    from hitl.exit_cleanly import exit_now

    exit_now(0)
