"""What the OS and the server say about a benchmark's processes: CPU time from /proc (a process
and its children), the server's request counter from its Prometheus endpoint, the load average,
and an optional py-spy profile of a worker (BENCH_PROFILE=DIR)."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (the `temporal` CLI may run the server as a child)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += parents.get(current, [])
    return found


def cpu_seconds(pid: int, tree: bool = False) -> float:
    """User + system CPU time of a process (and, with `tree`, of its descendants), from /proc."""
    total = 0
    for each in process_tree(pid) if tree else [pid]:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def server_requests(metrics_url: str) -> Counter[str]:
    """The frontend's `service_requests` counter by operation, from the server's Prometheus
    endpoint: what clients and workers asked of it (the history and matching services of the
    same process count their own requests to each other too, which are not round trips)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("service_requests{") and 'service_name="frontend"' in line and 'operation="' in line:
            operation = line.split('operation="', 1)[1].split('"', 1)[0]
            counts[operation] += int(float(line.rsplit(" ", 1)[1]))
    return counts


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def start_profiler(pid: int, folder: Path, task_queue: str) -> subprocess.Popen[bytes] | None:
    """With BENCH_PROFILE=DIR, `py-spy record` (installed by hand: not a dependency) samples the
    worker over the measured phase into DIR/<task queue>.txt, collapsed stacks with line numbers.
    The profiler's own CPU is not the worker's, but its sampling slows it: figures of a profiled
    run are not the table's."""
    into = os.environ.get("BENCH_PROFILE")
    if not into:
        return None
    Path(into).mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--nonblocking",
         "-o", str(Path(into) / f"{task_queue}.txt")],
        stdout=subprocess.DEVNULL, stderr=(folder / f"{task_queue}.py-spy.log").open("w"),
    )


def stop_profiler(profiler: subprocess.Popen[bytes] | None) -> None:
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        profiler.wait(timeout=60)
