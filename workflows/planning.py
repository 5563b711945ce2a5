"""What to do with each tool call the model asked for: run it, pause, or refuse.

A model can ask for anything: a tool that does not exist, arguments that are
not JSON or do not fit the schema. None of that may fail the workflow, so each
becomes a tool result the model can read and correct.

Two layers decide. The tool catalog (does the tool exist, do the arguments
fit, does the tool itself want approval) is consulted by the model activity
and its answer is recorded with the reply, so changing a tool's setting or
schema on the worker changes new steps and never the replay of old ones. The
session's own rules (require_approval, auto_approve) are applied here, in the
workflow, on top.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from workflows.conversation import ModelReply, ToolCall
from workflows.forms import describe_validation_error
from workflows.limits import MAX_ARGUMENT_BYTES, MAX_CALLS_PER_REPLY, MAX_NAME_BYTES, clip, utf8_size
from workflows.policy import OperatorPolicy, ToolFloor
from workflows.requests import Judgement, JudgementRequest, Pin
from workflows.rules import DecisionRules

# What the model backend puts in place of arguments too large to carry (see activities/openai_backend.py).
OVERSIZED_ARGUMENTS = "__oversized_arguments_bytes__"

if TYPE_CHECKING:
    from hitl.catalog.specs import ToolSpec


class PlannedCall(BaseModel):
    call_id: str
    tool: str
    action: Literal["run", "approve", "ask", "refuse"]
    args: dict[str, Any] = {}
    review: bool = False
    refusal: str | None = None
    policy: str | None = None
    # Recorded for tools whose schema lives outside this code (MCP): edited
    # arguments are checked against the schema the call was planned with.
    input_schema: dict[str, Any] | None = None
    destructive: bool | None = None
    # Judged by the worker with the operator's policy (workflows/policy.py); absent in plans
    # recorded before it. `floor` "always" is approval no session rule can waive.
    floor: Literal["always", "never"] | None = None
    because: str | None = None  # why a person is needed, as the pending item says
    description: str | None = None
    approvers: list[str] | None = None  # the policy's, groups expanded
    required_approvals: int | None = None
    four_eyes: bool | None = None
    remember_allowed: bool | None = None
    untrusted: bool | None = None  # untrusted output entered the turn: no remembered approval covers it
    # The worker's "run" holds for any arguments of this tool (no predicate, no untrusted-output
    # rule): the workflow may reuse it for a while instead of asking again (AgentWorkflow.judge_by_worker).
    reusable: bool | None = None


def plan_reply(reply: ModelReply, offered: dict[str, ToolSpec], rules: DecisionRules | None = None) -> list[PlannedCall]:
    """One plan per tool call of a reply; past MAX_CALLS_PER_REPLY, the rest are refused.

    The catalog's recorded verdict is used when the reply carries one (every
    reply since verdicts are recorded); older replies are planned live.
    """
    recorded = reply.catalog_plans if reply.catalog_plans and len(reply.catalog_plans) == len(reply.tool_calls) else None
    plans = []
    for index, call in enumerate(reply.tool_calls):
        if index >= MAX_CALLS_PER_REPLY:
            plans.append(_refuse(
                call, f"Error: at most {MAX_CALLS_PER_REPLY} tool calls are taken from one reply; this one did not run. "
                "Call it again in a later step if it is still needed."
            ))
        elif recorded is None:
            plans.append(plan_call(call, offered, rules))
        else:
            plan = PlannedCall.model_validate({**recorded[index], "call_id": call.id})
            plans.append(with_session_rules(plan, rules) if plan.action in ("run", "approve") else plan)
    return plans


def catalog_plans(reply: ModelReply, offered: dict[str, ToolSpec]) -> list[dict[str, Any]]:
    """The catalog's verdict on each call, before any session rule (computed by the model activity)."""
    return [plan_call(call, offered).model_dump(exclude={"call_id"}, exclude_none=True) for call in reply.tool_calls]


def judge(request: JudgementRequest, offered: dict[str, ToolSpec], policy: OperatorPolicy | None,
          policy_error: str | None = None) -> Judgement:
    """The worker's verdict on each call of a reply, from that call's own arguments: the
    catalog's (exists, fits, wants approval), then the operator's policy, the definition the
    session first saw, and untrusted output in this turn. Session rules come on top, in the
    workflow (with_session_rules). `policy_error`: a policy that could not be read asks a
    person for every call, rather than let one run the policy might forbid."""
    plans: list[dict[str, Any]] = []
    new_pins: dict[str, Pin] = {}
    tainted = policy.first_untrusted(request.results_this_turn) if policy else None
    for call in request.reply.tool_calls:
        plan = plan_call(call, offered)
        spec = offered.get(call.name)
        if spec is not None and plan.action in ("run", "approve"):
            if plan.action == "approve":
                plan.because = tool_reason(spec)
            if policy_error is not None:
                plan = _asks(plan, f"the operator's policy cannot be read ({clip(policy_error, 300)})", untrusted=True)
            elif policy is not None:
                plan = with_floor(plan, policy.floor_for(plan.tool))
            pin = request.pins.get(plan.tool) or new_pins.get(plan.tool)
            sha = spec.definition_sha256()
            if sha is not None and pin is None:
                new_pins[plan.tool] = Pin(sha256=sha, needed_approval=plan.action == "approve")
            elif sha is not None and pin is not None and pin.sha256 != sha and pin.needed_approval:
                if policy is not None and policy.accepts_definition(plan.tool, sha):
                    new_pins[plan.tool] = Pin(sha256=sha, needed_approval=plan.action == "approve", accepted=True)
                else:
                    plan = _asks(plan, f"the definition of {plan.tool} changed since this session first saw it "
                                       f"(it needed approval then; an operator accepts definition {sha[:16]} in the "
                                       "policy's accepted_definitions)", untrusted=True)
            if tainted is not None and policy is not None and policy.needs_approval_when_untrusted(plan.tool):
                plan = _asks(plan, f"untrusted output from {tainted[0]} ({tainted[1]})", untrusted=True)
            plan.reusable = (plan.action == "run" and spec.needs_approval is False and policy_error is None
                             and not (policy and policy.needs_approval_when_untrusted(plan.tool))) or None
        plans.append(_recorded(plan, call))
    return Judgement(plans=plans, new_pins=new_pins, policy_sha256=policy.version if policy else None)


def tool_reason(spec: ToolSpec) -> str:
    """Why the tool itself asks a person: its flag, or its predicate on this call's arguments."""
    if callable(spec.needs_approval):
        return "the tool's own rule for these arguments: it needs approval"
    return "the tool's own setting: it needs approval"


def _recorded(plan: PlannedCall, call: ToolCall) -> dict[str, Any]:
    """A plan as the judgement's marker records it: without arguments that are the call's own
    (the reply in history holds them already; a step's marker stays small)."""
    recorded = plan.model_dump(exclude={"call_id"}, exclude_none=True)
    if plan.action != "refuse" and plan.args == _sent_args(call):
        recorded.pop("args", None)
        recorded["args_as_sent"] = True
    return recorded


def _sent_args(call: ToolCall) -> Any:
    try:
        return json.loads(call.function.arguments or "{}")
    except (json.JSONDecodeError, RecursionError):
        return None


def with_recorded_args(plans: list[dict[str, Any]], reply: ModelReply) -> list[dict[str, Any]]:
    """Plans whose marker left out the call's own arguments, with them back (see _recorded)."""
    return [{key: value for key, value in plan.items() if key != "args_as_sent"} | {"args": _sent_args(call)}
            if plan.get("args_as_sent") else plan for plan, call in zip(plans, reply.tool_calls)]


def with_floor(plan: PlannedCall, floor: ToolFloor | None) -> PlannedCall:
    """The operator's word on a planned call: approval always or never, and who decides."""
    if floor is None:
        return plan
    update: dict[str, Any] = {
        "approvers": floor.approvers, "required_approvals": floor.required_approvals if floor.required_approvals > 1 else None,
        "four_eyes": floor.four_eyes or None, "remember_allowed": False if not floor.remember else None,
    }
    if floor.approval == "always":
        update.update(action="approve", floor="always", policy=None,
                      because=f"{floor.line}: approval always")
    elif floor.approval == "never" and plan.action == "approve":
        update.update(action="run", floor="never", policy=f"{floor.line}: approval never", because=None)
    return plan.model_copy(update=update)


def _asks(plan: PlannedCall, because: str, untrusted: bool = False) -> PlannedCall:
    """A call that would have run on its own waits for a person; one that waits already says why."""
    if plan.action == "run":
        return plan.model_copy(update={"action": "approve", "because": because, "policy": None, "untrusted": untrusted})
    return plan.model_copy(update={"because": plan.because if plan.floor == "always" else because,
                                   "untrusted": untrusted or plan.untrusted})


def policy_names_deciders(plan: PlannedCall) -> bool:
    """The operator's policy says who decides this tool, or how (approvers, a count, four
    eyes, no remembering): when it runs, those people decide, whatever a session says."""
    return (plan.approvers is not None or (plan.required_approvals or 1) > 1 or bool(plan.four_eyes)
            or plan.remember_allowed is False)


def with_session_rules(plan: PlannedCall, rules: DecisionRules | None) -> PlannedCall:
    """A session's rules on top of the worker's verdict: they may add approval, and waive it
    only where neither the operator's policy nor untrusted output requires it."""
    override = rules.policy_for(plan.tool) if rules else None
    if override is None:
        return plan
    if override == "auto" and plan.action == "approve" and (plan.floor == "always" or plan.untrusted):
        return plan
    if override == "auto" and plan.action == "approve" and policy_names_deciders(plan):
        return plan.model_copy(update={"because": f"{plan.because or 'it needs approval'}; the session's auto_approve "
                                                  "does not waive it: the operator's policy names who decides"})
    rule = f"session {'require_approval' if override == 'require' else 'auto_approve'}"
    return plan.model_copy(update={
        "action": "approve" if override == "require" else "run", "policy": rule,
        "because": rule if override == "require" and plan.action != "approve" else plan.because,
    })


def plan_call(call: ToolCall, offered: dict[str, ToolSpec], rules: DecisionRules | None = None) -> PlannedCall:
    spec = offered.get(call.name)
    if spec is None:
        available = ", ".join(sorted(offered)) or "none"
        return _refuse(call, f"Error: there is no tool named {clip(call.name, MAX_NAME_BYTES)!r}. Available tools: {available}.")
    size = utf8_size(call.function.arguments)
    if size > MAX_ARGUMENT_BYTES:
        return _refuse(call, _too_large(call.name, size))
    try:
        raw = json.loads(call.function.arguments or "{}")
    except (json.JSONDecodeError, RecursionError) as error:
        return _refuse(call, f"Error: the arguments for {call.name} are not valid JSON ({clip(str(error), 200)}). Call it again with a JSON object.")
    if not isinstance(raw, dict):
        return _refuse(call, f"Error: the arguments for {call.name} must be a JSON object, not {type(raw).__name__}.")
    if set(raw) == {OVERSIZED_ARGUMENTS}:
        return _refuse(call, _too_large(call.name, raw[OVERSIZED_ARGUMENTS]))
    try:
        args, needs_approval = spec.check(raw)  # a failing approval predicate fails safe: approval
    except ValidationError as error:
        return _refuse(call, f"Error: the arguments do not fit {call.name}: {describe_validation_error(error)}.")
    except Exception as error:  # a user tool's own validator (or a JSON schema) may raise anything
        return _refuse(call, f"Error: the arguments do not fit {call.name}: {clip(str(error), 500)}.")
    planned = PlannedCall(call_id=call.id, tool=call.name, action="run", args=args, review=spec.review,
                          input_schema=spec.recorded_schema(), destructive=spec.destructive or None)
    if spec.answered_by_human:
        planned.action = "ask"
        return planned
    planned.action = "approve" if needs_approval else "run"
    if planned.action == "run" and spec.approval_rule:
        planned.policy = spec.approval_rule
    return with_session_rules(planned, rules)


def _too_large(tool: str, size: Any) -> str:
    return (f"Error: the arguments for {tool} were {size} bytes; at most {MAX_ARGUMENT_BYTES} are accepted. "
            "Call it again with shorter arguments.")


def _refuse(call: ToolCall, message: str) -> PlannedCall:
    return PlannedCall(call_id=call.id, tool=call.name, action="refuse", refusal=message)


def with_unique_call_ids(reply: ModelReply, used: set[str], step: int) -> ModelReply:
    """Give every call an id no earlier call in the session has.

    Some servers return no ids, or the same few ids every time; results and
    bookings are keyed by call id, so a repeat would be a different call
    mistaken for one already made.
    """
    seen = set(used)
    calls = []
    for index, call in enumerate(reply.tool_calls):
        call_id = call.id if call.id and utf8_size(call.id) <= MAX_NAME_BYTES else f"call_{step}_{index}"
        if call_id in seen:
            call_id = f"{call_id}_{step}_{index}"
        seen.add(call_id)
        calls.append(call.model_copy(update={"id": call_id}))
    return reply.model_copy(update={"tool_calls": calls})
