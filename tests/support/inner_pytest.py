"""Test files run again in a pytest of their own: the tiers that need another environment (a
worker that caches nothing, a machine under load) from the README's one test command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class InnerRun:
    """A pytest started in the background; `finish()` waits for it and says how it went."""

    name: str
    process: subprocess.Popen[str]
    log: Path

    def finish(self, timeout: float = 1800) -> tuple[int, str]:
        try:
            self.process.wait(timeout=timeout)
        finally:
            self.stop()
        return self.process.returncode, self.log.read_text(errors="replace")

    def stop(self) -> None:
        """End whatever is left of the child's process group: its dev server too, which a SIGKILL
        of pytest alone would leave running (a child that finished has stopped its own)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=60)


def start_pytest(name: str, args: list[str], tmp_path: Path, **environment: str) -> InnerRun:
    """pytest `args` with its own dev server and temporary folders, its output in a file (the
    captured logs of a failing run can be megabytes: never a pipe that could fill)."""
    log = tmp_path / f"{name}.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / name), *args],
            cwd=ROOT, env={**os.environ, **environment}, stdout=output, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
    return InnerRun(name, process, log)


def what_failed(output: str) -> str:
    """The start of pytest's failures section (the first failure with its captured log: the
    worker's warnings say what each failed attempt met) and the summary."""
    starts = [at for at in (output.find("= ERRORS ="), output.find("= FAILURES =")) if at >= 0]
    start = min(starts) if starts else -1
    summary = output.find("short test summary info")
    head = output[start:start + 40_000] if start >= 0 else output[:4_000]
    return head + "\n...\n" + (output[summary:] if summary >= 0 else output[-4_000:])


def assert_all_passed(*runs: InnerRun) -> None:
    """Wait for every run, then say how each that failed went (one failure does not hide another)."""
    outcomes = [(run.name, *run.finish()) for run in runs]
    failed = [f"{name}:\n{what_failed(output)}" for name, code, output in outcomes
              if code != 0 or " passed" not in (output.strip().splitlines() or [""])[-1]]
    assert not failed, "\n\n".join(failed)
