"""The engine's floor: the least a durable agent with one approval can do.

Kept in a module of its own that imports nothing but temporalio, so the
sandbox has as little to load per run as a hand-written workflow would.
"""

from __future__ import annotations

import time
from datetime import timedelta

from temporalio import activity, workflow

TOOL_STARTED: dict[str, float] = {}


@activity.defn(name="raw_model")
async def raw_model(step: int) -> str:
    return "call the tool" if step == 0 else "finished"


@activity.defn(name="raw_tool")
async def raw_tool(token: str) -> str:
    TOOL_STARTED[token] = time.perf_counter()
    return f"done {token}"


@workflow.defn
class RawAgent:
    def __init__(self) -> None:
        self.waiting = False
        self.approved = False
        self.answer: str | None = None

    @workflow.run
    async def run(self, token: str) -> str:
        await workflow.execute_activity(raw_model, 0, start_to_close_timeout=timedelta(seconds=30))
        self.waiting = True
        await workflow.wait_condition(lambda: self.approved)
        await workflow.execute_activity(raw_tool, token, start_to_close_timeout=timedelta(seconds=30))
        self.answer = await workflow.execute_activity(raw_model, 1, start_to_close_timeout=timedelta(seconds=30))
        return self.answer

    @workflow.query
    def is_waiting(self) -> bool:
        return self.waiting and not self.approved

    @workflow.query
    def is_done(self) -> bool:
        return self.answer is not None

    @workflow.update
    def approve(self) -> bool:
        self.approved = True
        return True
