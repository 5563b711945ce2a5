"""The README's `temporal` commands work as printed, in the order printed.

Each ```bash block of the "Human in the loop, in depth" section is run against
a worker on the default task queue, with TEMPORAL_ADDRESS pointing at the test
server (the CLI reads it). A command followed by a `#   refused:` line must fail
with that reason; before a decision, the block waits for the session to pause.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from console.demo import seed_workspace
from devserver import temporal_binary
from tests.conftest import eventually, query, record_if_asked
from worker import build_worker

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks() -> list[list[tuple[str, str | None]]]:
    """(command, expected refusal) pairs of each bash block in the in-depth section."""
    text = README.read_text()
    section = text[text.index("## Human in the loop, in depth") : text.index("## Built-in tools")]
    found = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        lines = [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
        commands: list[tuple[str, str | None]] = []
        pending = ""
        for line in lines:
            if pending:
                pending += " " + line
            elif line.startswith("temporal "):
                pending = line
            elif line.startswith("#   refused:") and commands:
                commands[-1] = (commands[-1][0], line.split("refused:", 1)[1].strip())
                continue
            else:
                continue
            try:
                shlex.split(pending, comments=True)
            except ValueError:  # a quoted argument goes on to the next line
                continue
            commands.append((pending, None))
            pending = ""
        found.append(commands)
    return found


@pytest.fixture
async def default_queue_worker(env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Path]:
    workspace = tmp_path / "workspace"
    seed_workspace(workspace)
    monkeypatch.chdir(tmp_path)  # `tail -f workspace/...` style paths resolve here
    since = datetime.now(timezone.utc)
    async with build_worker(env.client, "hitl-agent", OfflineModel(), workspace):
        yield workspace
    await record_if_asked(env.client, "hitl-agent", since)


@pytest.mark.parametrize("commands", blocks(), ids=lambda c: c[0][0].split("--workflow-id ")[1].split()[0])
async def test_readme_block_works_as_printed(env: WorkflowEnvironment, default_queue_worker: Path, commands) -> None:
    environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
    for command, refusal in commands:
        argv = shlex.split(command, comments=True)
        workflow_id = argv[argv.index("--workflow-id") + 1]
        if "start" not in argv[:3] and ("signal" in argv or "update" in argv):
            handle = env.client.get_workflow_handle(workflow_id)
            await eventually(lambda: query(handle, "status"), lambda s: s["state"] in ("awaiting_human", "idle"))
        argv[0] = temporal_binary()
        completed = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, env=environ, timeout=60)
        output = completed.stdout + completed.stderr
        if refusal:
            assert completed.returncode != 0 and refusal in output, (command, output)
        else:
            assert completed.returncode == 0, (command, output)
