"""Running sessions must keep replaying: recorded histories go through `Replayer`.

tests/histories holds histories of every test scenario, recorded with
`HITL_RECORD_HISTORIES=tests/histories pytest`. A change to the workflow that
would break a session paused in production fails here; guard intended
changes with `workflow.patched`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from settings import DATA_CONVERTER
from tests import example_tools  # noqa: F401  (the corpus was recorded with these tools registered)
from tests.conftest import Agent, eventually, pending_items, query, settled
from worker import SANDBOX
from workflows.agent import AgentWorkflow

CORPUS = Path(__file__).parent / "histories"


def replayer() -> Replayer:
    return Replayer(
        workflows=[AgentWorkflow], data_converter=DATA_CONVERTER,
        workflow_runner=SandboxedWorkflowRunner(restrictions=SANDBOX),
    )


def corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.json"))


@pytest.mark.parametrize("path", corpus(), ids=lambda p: p.stem[:60])
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem.split("--", 1)[-1], path.read_text())
    await replayer().replay_workflow(history)


def test_the_corpus_covers_the_scenarios() -> None:
    names = {p.stem.split("--")[0] for p in corpus()}
    assert len(names) >= 20, f"only {len(names)} scenarios recorded in {CORPUS}"


async def test_a_session_run_just_now_replays(agent: Agent) -> None:
    session = await agent.start("book me a flight to Beijing on 2026-12-24")
    await pending_items(session)
    await session.signal("answer", {"answer": "Shanghai"})
    await session.signal("user_message", {"text": "please delete notes.txt"})
    await session.signal("approve", {"call_id": "nope"})
    [delete] = await eventually(
        lambda: query(session, "pending"), lambda items: [i["tool"] for i in items] == ["delete_file"]
    )
    await session.signal("reject", {"call_id": delete["call_id"], "reason": "no"})
    await settled(session)
    await replayer().replay_workflow(await session.fetch_history())
