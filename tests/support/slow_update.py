"""A workflow whose Update keeps its workflow task in flight for a second (a local activity that
waits that long, done within the task), which is when the server keeps one query for later and
turns the others away ("consistent query buffer is full")."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

IN_FLIGHT_SECONDS = 1.0


@activity.defn
async def take_a_second() -> None:
    await asyncio.sleep(IN_FLIGHT_SECONDS)


@workflow.defn(sandboxed=False)
class SlowToAccept:
    def __init__(self) -> None:
        self.accepted = 0

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.accepted >= 2)
        return self.accepted

    @workflow.update
    async def accept(self) -> int:
        await workflow.execute_local_activity(take_a_second, start_to_close_timeout=timedelta(seconds=30))
        self.accepted += 1
        return self.accepted

    @workflow.query
    def count(self) -> int:
        return self.accepted
