"""A workflow whose Update keeps its workflow task in flight until the test lets it go (a local
activity that waits for the test's gate, within the task): while it is in flight the server keeps
one query for later and turns the others away ("consistent query buffer is full"). The test holds
the task as long as it needs to see that, however slow the machine."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

HELD_AT_MOST_SECONDS = 120  # a test that never lets go fails its Update, rather than hanging


class Gate:
    """Opened by the test; the worker runs in the test's process, so one asyncio.Event serves."""

    event: asyncio.Event | None = None

    @classmethod
    def close(cls) -> None:
        cls.event = asyncio.Event()

    @classmethod
    def open(cls) -> None:
        if cls.event is not None:
            cls.event.set()


@activity.defn
async def held_by_the_test() -> None:
    if Gate.event is not None:
        await asyncio.wait_for(Gate.event.wait(), HELD_AT_MOST_SECONDS)


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
        await workflow.execute_local_activity(held_by_the_test,
                                              start_to_close_timeout=timedelta(seconds=HELD_AT_MOST_SECONDS + 30))
        self.accepted += 1
        return self.accepted

    @workflow.query
    def count(self) -> int:
        return self.accepted
