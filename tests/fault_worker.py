"""A worker for the fault drill: the product's worker with time to be killed in.

The offline model thinks for a moment and every tool pauses before and after
its side effect, so a SIGKILL lands mid model call, mid tool (before or after
the effect) and mid decision, as it would with real latencies.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

from activities.offline_model import OfflineModel
from activities.run_tool import ToolActivities
from settings import Settings, connect
from worker import build_worker
from workflows.conversation import ModelReply
from workflows.requests import ModelRequest, ToolInvocation

PAUSE = float(os.environ.get("FAULT_PAUSE_SECONDS", "0.3"))


class ThoughtfulModel(OfflineModel):
    async def complete(self, request: ModelRequest) -> ModelReply:
        await asyncio.sleep(random.uniform(0, PAUSE))
        return await super().complete(request)


class SlowTools(ToolActivities):
    async def _run(self, invocation: ToolInvocation) -> str:
        await asyncio.sleep(random.uniform(0, PAUSE))
        result = await super()._run(invocation)
        await asyncio.sleep(random.uniform(0, PAUSE))
        return result


async def main() -> None:
    settings = Settings.from_env()
    client = await connect(settings)
    workspace = Path(settings.workspace)
    worker = build_worker(client, settings.task_queue, ThoughtfulModel(), workspace, tools=SlowTools(workspace))
    print("fault worker ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
