"""The judging local activities: the catalog's and the operator's policy's word on rules and calls.

What the worker's catalog and the operator's policy say of a session's rules and of each call a
model asks for (the workflow's side: workflows/judging.py)."""

from __future__ import annotations

from temporalio import activity

from activities.tools import CATALOG  # the catalog, with the built-in tools registered
from hitl.catalog.bounded_regexes import regex_time_limit
from hitl.catalog.delegates import delegate_spec
from workflows.agents import AgentsError, agents_from_env, delegate_tool
from workflows.contract import CATALOG_VERDICTS, JUDGE_CALLS, UNKNOWN_TOOLS
from workflows.planning import catalog_plans, judge
from workflows.policy import PolicyError, policy_from_env
from workflows.requests import Judgement, JudgementRequest, VerdictRequest
from workflows.rules import DecisionRules


@activity.defn(name=UNKNOWN_TOOLS.name)
async def unknown_tools(rules: dict) -> list[str]:
    """What a session's rules name that this worker's catalog does not have (a local activity);
    the delegate tools of the operator's agents and of the session's (`agents`: their names) count."""
    rules = dict(rules)
    agents = set(rules.pop("agents", None) or [])
    try:
        agents |= set(agents_from_env())
    except AgentsError:
        pass  # refused as the session learns its environment, with the reason
    known = set(CATALOG.names()) | {delegate_tool(agent) for agent in agents}
    return DecisionRules.model_validate(rules).unknown_tools(known)


@activity.defn(name=CATALOG_VERDICTS.name)
async def catalog_verdicts(request: VerdictRequest) -> list[dict]:
    """The catalog's verdict on each call of a reply (a local activity, see AgentWorkflow.judge_calls)."""
    offered = {spec.name: spec for spec in CATALOG.select(request.tools)}
    with regex_time_limit():
        return catalog_plans(request.reply, offered)


@activity.defn(name=JUDGE_CALLS.name)
async def judge_calls(request: JudgementRequest) -> Judgement:
    """The worker's verdict on each call of a reply, with the operator's policy as the file says
    now (a local activity, recorded: see AgentWorkflow.judge_by_worker)."""
    offered = {spec.name: spec for spec in CATALOG.select(request.tools)}
    offered.update({tool: delegate_spec(tool, agent) for tool, agent in request.delegates.items()})
    try:
        policy, problem = policy_from_env(), None
    except PolicyError as error:
        policy, problem = None, str(error)
    with regex_time_limit():  # every call of the reply against its schema: one budget
        return judge(request, offered, policy, problem)
