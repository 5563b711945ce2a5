"""The commands leave without interpreter teardown, whatever way they end, and keep Python's exit code.

Teardown with the SDK's core threads alive sometimes ends in a segmentation fault
(exit -11 instead of 1: a worker that refused to join a task queue was once read
as crashed). `exit_now` skips it; these check that a command's every way out goes
through it, by registering an atexit handler that only teardown runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEARDOWN = "interpreter teardown ran"


def leave(command: str, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = (f"import atexit, sys\natexit.register(lambda: print({TEARDOWN!r}))\n"
              f"sys.argv = ['{command}']\n{code}\n")
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT), **env})


@pytest.mark.parametrize("body, code, stderr", [
    ("return None", 0, ""),
    ("return 3", 3, ""),
    ("raise SystemExit('refused: say why')", 1, "refused: say why\n"),
    ("raise SystemExit(2)", 2, ""),
    ("raise KeyboardInterrupt", 130, ""),
])
def test_exit_with_keeps_the_code_python_would_give_and_skips_teardown(body: str, code: int, stderr: str) -> None:
    ran = leave("x", f"from hitl.exit_cleanly import exit_with\ndef run():\n    {body}\nexit_with(run)")
    assert (ran.returncode, ran.stderr, ran.stdout) == (code, stderr, "")


def test_an_unexpected_error_is_printed_and_exits_1_without_teardown() -> None:
    ran = leave("x", "from hitl.exit_cleanly import exit_with\ndef run():\n    raise ValueError('boom')\nexit_with(run)")
    assert ran.returncode == 1 and "ValueError: boom" in ran.stderr and TEARDOWN not in ran.stdout


def test_a_worker_that_refuses_to_start_leaves_without_teardown() -> None:
    ran = leave("worker.py", "from hitl.worker import command_line\ncommand_line()", HITL_WORKFLOW_SANDBOX="maybe")
    assert ran.returncode == 1 and "HITL_WORKFLOW_SANDBOX must be on or off" in ran.stderr
    assert TEARDOWN not in ran.stdout


def test_a_command_line_usage_error_leaves_without_teardown() -> None:
    ran = leave("starter.py", "sys.argv.append('no-such-command')\nfrom hitl.cli import command_line\ncommand_line()")
    assert ran.returncode == 2 and "invalid choice" in ran.stderr
    assert TEARDOWN not in ran.stdout
