"""The engine's floor: the least a durable agent can do on Temporal.

`RawAgent` is one approval between two model calls; `RawLongAgent` is the long
turn as every other agent integration on Temporal writes it, each model
activity's input being the whole conversation. Kept in a module of its own
that imports nothing but temporalio, so the sandbox has as little to load per
run as a hand-written workflow would.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

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


RAW_LONG_CALL: dict[str, Any] = dict(start_to_close_timeout=timedelta(minutes=5), retry_policy=RetryPolicy(maximum_attempts=3))


@workflow.defn
class RawLongAgent:
    """A ReAct turn whose model activity receives the whole request every step:
    system prompt, tool schemas and every message so far. Temporal records each
    activity's input, so the history grows with the square of the turn's length.
    The activities (`raw_long_model`, `raw_long_tool`) are the benchmark's; a few
    attempts each, so a broken one ends the turn instead of retrying for ever."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": request["message"]}]
        steps = 0
        while steps < request["max_steps"]:
            whole = {"system": request["system"], "tools": request["tools"], "messages": messages}
            reply = await workflow.execute_activity("raw_long_model", whole, **RAW_LONG_CALL)
            steps += 1
            messages.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                result = await workflow.execute_activity("raw_long_tool", call, **RAW_LONG_CALL)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return {"steps": steps, "answer": messages[-1].get("content")}
