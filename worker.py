"""python worker.py: run the agent workflow and its activities on HITL_TASK_QUEUE."""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.notify import NotifyActivities
from activities.model import ModelActivities, ModelBackend, backend_from_env, unknown_tools
from activities.run_tool import ToolActivities
from exit_cleanly import exit_now
from settings import Settings, connect
from workflows.agent import AgentWorkflow


# The sandbox re-imports every module a workflow uses, once per workflow run.
# pydantic and our pure modules are deterministic: sharing them saves most of a
# megabyte and the model-building time per cached session.
SANDBOX = SandboxRestrictions.default.with_passthrough_modules(
    "pydantic", "pydantic_core", "annotated_types", "typing_inspection",
    "workflows.conversation", "workflows.forms", "workflows.pauses", "workflows.planning",
    "workflows.requests", "workflows.rules", "workflows.session", "workflows.limits", "workflows.handover",
)


def build_worker(
    client: Client,
    task_queue: str,
    backend: ModelBackend,
    workspace: Path,
    notify_url: str | None = None,
    tools: ToolActivities | None = None,
) -> Worker:
    workspace.mkdir(parents=True, exist_ok=True)
    model, notify = ModelActivities(backend, client), NotifyActivities(workspace, notify_url)
    tools = tools or ToolActivities(workspace)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[model.call_model, tools.run_tool, notify.notify, unknown_tools],
        workflow_runner=SandboxedWorkflowRunner(restrictions=SANDBOX),
        # A rejected Update is answered with the request it rejects; the worker's own
        # size check would turn a caller's oversized Update into a task that fails for
        # ever. The server still refuses anything it would store over its limits.
        disable_payload_error_limit=True,
    )


def load_tool_modules() -> list[str]:
    """Modules named in HITL_TOOL_MODULES register their @tool functions on import."""
    names = [name.strip() for name in os.environ.get("HITL_TOOL_MODULES", "").split(",") if name.strip()]
    for name in names:
        importlib.import_module(name)
    return names


async def connect_with_patience(settings: Settings, attempts: int = 30) -> Client:
    """The server may still be starting (docker compose starts both at once)."""
    for attempt in range(1, attempts + 1):
        try:
            return await connect(settings)
        except RuntimeError as error:
            if attempt == attempts:
                raise
            print(f"worker: cannot reach {settings.address} yet ({error}); retrying", file=sys.stderr)
            await asyncio.sleep(2)
    raise AssertionError("unreachable")


async def main() -> None:
    settings = Settings.from_env()
    extra = load_tool_modules()
    backend = backend_from_env(settings)
    client = await connect_with_patience(settings)
    worker = build_worker(client, settings.task_queue, backend, settings.workspace, settings.notify_url)
    print(f"worker: {settings.address} namespace={settings.namespace} task_queue={settings.task_queue}")
    print(f"worker: model: {backend.description}")
    print(f"worker: workspace: {settings.workspace.resolve()}" + (f"; extra tools from {extra}" if extra else ""))
    print(f"worker: notifications: {settings.notify_url or settings.workspace / 'notifications.jsonl'}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        await stop.wait()
        print("worker: shutting down", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
    exit_now(0)
