"""One setup for every worker of the product: the worker (hitl/worker.py) and the replayer that
checks recorded histories (tests/support/replaying.py) both take HitlPlugin (hitl/plugin.py), so a
replay runs the workflow as the worker runs it: the same workflow, sandbox, converter and
interceptors. Before the plugin the replayer had drifted to one interceptor of the worker's three."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.plugin import SANDBOX
from hitl.worker import build_worker
from tests.support.replaying import worker_replayer


def kinds(items: Sequence[Any]) -> list[type]:
    return [type(item) for item in items]


async def test_the_replayer_runs_the_workflow_as_the_worker_does(env: WorkflowEnvironment, workspace: Path) -> None:
    async with build_worker(env.client, "plugin-setup", OfflineModel(), workspace) as worker:
        runs = worker.config(active_config=True)
    replays = worker_replayer().config(active_config=True)
    assert kinds(replays["interceptors"]) == kinds(runs["interceptors"])
    assert list(replays["workflows"]) == list(runs["workflows"])
    assert type(replays["workflow_runner"]) is type(runs["workflow_runner"])
    assert getattr(runs["workflow_runner"], "restrictions") is getattr(replays["workflow_runner"], "restrictions") is SANDBOX
    assert replays["data_converter"] is env.client.data_converter
    assert runs["disable_payload_error_limit"] is True
