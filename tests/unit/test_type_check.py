"""The type checker, run as the project configures it (pyproject.toml, [tool.mypy]): strict on
workflows/, the default level on activities/, hitl/, worker.py and starter.py.

Workflow code runs again whenever a paused session replays, so a misspelt attribute in a branch
that only old histories take fails a workflow task in production, on every retry. AgentWorkflow's
parts are typed by what they are built with (workflows/agent.py, build_parts); this check holds
every call from one part to another to it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_code_type_checks_under_the_projects_configuration() -> None:
    # Run from the root so mypy reads its files and flags from pyproject.toml; its cache
    # (.mypy_cache, ignored by git) makes a run after a small change take a second or two.
    checked = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert checked.returncode == 0, f"mypy found errors:\n{checked.stdout}{checked.stderr}"
    assert "Success: no issues found" in checked.stdout
