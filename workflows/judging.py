"""Judging a reply's calls: run, ask a person, or refuse, decided in this worker and recorded.

The verdict on each call comes from a local activity (a marker in history that
nobody outside the worker can answer), never from the model activity's result:
anyone who reaches the Temporal frontend can complete an activity by its id.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from workflows.contract import JUDGE_CALLS
from workflows.agents import agent_of
from workflows.conversation import ModelReply
from workflows.limits import MAX_ARGUMENT_BYTES, utf8_size
from workflows.planning import with_recorded_args
from workflows.requests import Judgement, JudgementRequest
from workflows.activity_calls import LocalChecks
from workflows.delegating import Delegating
from workflows.session_run import SessionRun

PINS_KEPT = 500
# How long a worker's "run" for a tool whose verdict no argument changes is reused without asking
# the worker again: a changed policy file applies within this long. Each reuse saves a marker.
VERDICT_REUSE = timedelta(seconds=60)


class Judging:
    """A part of AgentWorkflow: the verdicts a step's plans are made from (workflows/planning.py)."""

    def __init__(self, session: SessionRun, checks: LocalChecks, delegating: Delegating) -> None:
        self.session = session
        self.checks = checks
        self.delegating = delegating

    async def judge_by_worker(self, reply: ModelReply) -> ModelReply:
        """Every reply's calls judged in this worker, each from its own arguments: the catalog,
        the operator's policy (read now), the definitions this session pinned, and whether
        untrusted output entered the turn. Nothing the model activity returned is taken: anyone
        who reaches the Temporal frontend can complete an activity by its id, while a local
        activity runs in this worker and is recorded as a marker nobody outside can answer."""
        reused = self.reused_verdicts(reply)
        if reused is not None:
            return reply.model_copy(update={"catalog_plans": reused})
        called = {call.name for call in reply.tool_calls}
        judgement = await self.checks.local_activity(
            JUDGE_CALLS.name, JudgementRequest(
                reply=reply.model_copy(update={"catalog_plans": None}), tools=self.session.config.tools,
                pins={tool: pin for tool, pin in self.session.run_state.pins.items() if tool in called},
                results_this_turn=self.session.run_state.results_this_turn,
                delegates={tool: agent_of(tool) or "" for tool in self.delegating.delegates()},
            ),
            result_type=Judgement, start_to_close_timeout=timedelta(seconds=30),
            summary="judge the calls: catalog and operator's policy",
        )
        for tool, pin in judgement.new_pins.items():
            if pin.accepted or (tool not in self.session.run_state.pins and len(self.session.run_state.pins) < PINS_KEPT):
                self.session.run_state.pins[tool] = pin
        for plan in judgement.plans:
            if plan.get("reusable"):
                self.session.reusable_runs[plan["tool"]] = ({k: v for k, v in plan.items() if k not in ("args", "args_as_sent")},
                                                    workflow.now())
        return reply.model_copy(update={"catalog_plans": with_recorded_args(judgement.plans, reply)})

    def reused_verdicts(self, reply: ModelReply) -> list[dict[str, Any]] | None:
        """The worker's recent "run" for every call of the reply, when each tool's verdict holds for
        any arguments (the worker said so), with the call's own arguments; None to ask the worker.
        Nothing here comes from the model activity; the tool activity checks the arguments again."""
        plans, now = [], workflow.now()
        for call in reply.tool_calls:
            found = self.session.reusable_runs.get(call.name)
            if found is None or now - found[1] > VERDICT_REUSE or utf8_size(call.function.arguments) > MAX_ARGUMENT_BYTES:
                return None
            plans.append({**found[0], "args_as_sent": True})
        plans = with_recorded_args(plans, reply)
        return plans if plans and all(isinstance(plan["args"], dict) for plan in plans) else None
