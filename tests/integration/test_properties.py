"""Property: no payload, however hostile, wedges a session or runs a tool without its decision.

Hypothesis sends random and adversarial payloads to every signal, every
Update and the start input of live sessions on a real dev server: megabyte
strings (in ids, names, reasons, comments and argument keys too), Chinese text
near every size cap, JSON nested 250 deep, NaN, infinities and 1e308 as
durations, wrong types everywhere, unknown payload encodings and forged
continue-as-new state. After each example:

- no run of the session has a failed workflow task (a failed task is retried
  for ever: the session is stuck);
- the queries (status, pending, transcript, audit) answer;
- every approval in the audit was given by someone allowed to give it, and the
  file only a decided call may delete is still there unless one was;
- a sane decision (the right call_id, by an allowed person) still settles the
  pending call, and the session can pause again.

Sessions are reused while they stay paused, so CI stays fast (80 examples
per test, 240 in all, a few minutes); HITL_PROPERTY_EXAMPLES=500 hunts longer.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from temporalio.client import (
    WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import RawValue
from temporalio.service import RPCError

from tests.support.bad_inputs import CONTINUE_AS_NEW_FIELDS, FORGED_CARRIED
from hitl.devserver import MAX_UPDATE_REQUEST_BYTES
from tests.support.sessions import PATIENCE, Agent, without_rpc_retries
from tests.support.session_health import (
    assert_healthy,
    assert_no_failed_workflow_task,
    decide_sanely,
    is_settled,
    raw_bytes,
    raw_json,
    wait_for_status,
)

EXAMPLES = int(os.environ.get("HITL_PROPERTY_EXAMPLES", "80"))
# Shrinking replays a failure hundreds of times against the live server; the
# failing example is printed either way. HITL_PROPERTY_SHRINK=1 shrinks it.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate, *([Phase.shrink] if os.environ.get("HITL_PROPERTY_SHRINK") else [])]
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=PHASES,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                           HealthCheck.large_base_example, HealthCheck.filter_too_much],
)
SIGNALS = ("user_message", "approve", "reject", "answer", "cancel")
DELETE = "please delete notes.txt"
CURRENT = "<the pending call>"  # replaced by the pending call's id when sent
# Reused sessions take turns: what they ask for (an approval, a question, a
# review) and the rules over who decides. Each pause kind meets every payload.
OPENERS = (
    (DELETE, {"approvers": {"delete_file": ["oncall"]}}),
    (DELETE, {"approvers": {"*": ["oncall", "lead"]}, "required_approvals": {"delete_file": 2}}),
    ("book me a flight to Beijing on 2026-12-24", {"approvers": {"*": ["oncall"]}}),
    ("draft an email to ana@example.com about lunch saying see you at noon", {"approvers": {"*": ["oncall"]}}),
)

# ------------------------------------------------------------------ strategies

CJK = "\u4e2d"  # 3 bytes in UTF-8, 1 character
CAPS = (200, 1_000, 10_000, 32_768, 100_000, 300_000)  # character and byte caps, old and new
near_caps = st.sampled_from(sorted({n for cap in CAPS for n in (cap // 3 - 1, cap // 3, cap // 3 + 1, cap - 1, cap, cap + 1)}))
cjk_near_a_cap = near_caps.map(lambda n: CJK * n)
huge = st.sampled_from((1_000_000, 1_500_000, 2_100_000, 3_000_000)).map(lambda n: "x" * n)
short_text = st.text(max_size=12)  # lone surrogates too: they travel as \ud800 escapes
texts = st.one_of(short_text, st.sampled_from(["", " ", "\x00", "oncall", "lead", "call_1", DELETE]), cjk_near_a_cap, huge)
names = st.one_of(st.sampled_from(["oncall", "lead", "mallory", "", "ONCALL", "oncall "]), short_text, cjk_near_a_cap, huge)
call_ids = st.one_of(st.just(CURRENT), st.sampled_from(["call_1", "nope", "", "call_1 "]), short_text, huge)
floats = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1e308, -0.0, 0.0, 5e-324, 1e-9, 1e12, -1.0, 3600.0]),
    st.floats(allow_nan=True, allow_infinity=True),
)
integers = st.one_of(st.sampled_from([0, -1, 1, 2**63, -(2**63), 10**30]), st.integers())
keys = st.one_of(short_text, st.sampled_from(["path", "text", "call_id", "by", "args", "remember"]), huge)
leaves = st.one_of(st.none(), st.booleans(), integers, floats, texts)


def nested(depth: int) -> Any:
    value: Any = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


deep = st.sampled_from((10, 199, 200, 201, 250)).map(nested)
anything = st.one_of(
    leaves, deep,
    st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=6),
)
durations = st.one_of(floats, integers, anything)
remember = st.one_of(
    st.fixed_dictionaries({"scope": st.sampled_from(["tool", "same_args", "forever"]) | anything, "for_seconds": durations}),
    anything,
)
edited_args = st.one_of(
    st.sampled_from([{"path": "notes.txt"}, {"path": "other.txt"}, {"path": "../outside.txt"}, {"path": "/etc/passwd"}]),
    st.dictionaries(keys, anything, max_size=3),
    anything,
)
FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "user_message": {"text": texts | anything, "by": names | anything, "interrupt": st.booleans() | anything},
    "approve": {"call_id": call_ids | anything, "by": names | anything, "args": edited_args, "result": anything,
                "comment": texts | anything, "remember": remember, "expected_args_sha256": texts | anything},
    "reject": {"call_id": call_ids | anything, "by": names | anything, "reason": texts | anything,
               "expected_args_sha256": texts | anything},
    "answer": {"call_id": call_ids | anything, "answer": anything, "by": names | anything},
    "cancel": {"reason": texts | anything},
}


def payloads(verb: str) -> st.SearchStrategy[Any]:
    """Mostly the verb's own fields with hostile values, sometimes anything at all."""
    shaped = st.fixed_dictionaries({}, optional=FIELDS[verb])
    with_extra = st.tuples(shaped, st.dictionaries(keys, anything, max_size=2)).map(lambda pair: {**pair[1], **pair[0]})
    return st.one_of(shaped, shaped, with_extra, anything)


# How a payload travels: as JSON text (NaN, Infinity and deep nesting as written), or undecodable.
# An Update this close to the server's limit on in-flight Update payloads may be refused
# (RESOURCE_EXHAUSTED): its request adds the name, ids and headers to the payload.
NEAR_THE_LIMIT_BYTES = 10_000
ANSWER_SECONDS = 60 * PATIENCE  # an Update of megabytes on a busy machine: slow is not wrong
ENCODINGS = st.sampled_from(["json", "json", "json", "json", "binary/unknown", "binary/null", "json/protobuf", "bad json"])


def encode(payload: Any, how: str) -> RawValue:
    if how == "json":
        return raw_json(json.dumps(payload))
    if how == "bad json":
        return raw_bytes("json/plain", b'{"text": "unterminated \xff')
    return raw_bytes(how, json.dumps(payload).encode()[:1000])


def resolve(payload: Any, call_id: str) -> Any:
    """The CURRENT marker becomes the pending call's id, wherever it sits."""
    if payload == CURRENT:
        return call_id
    if isinstance(payload, dict):
        return {key: resolve(value, call_id) for key, value in payload.items()}
    return payload


def too_large(error: RPCError) -> bool:
    """The server (or gRPC before it) refused a payload over its size limit: nothing reached the session.

    An Update of several megabytes that the worker rejects comes back with the request attached,
    and the dev server (1.32) then drops that speculative task ("unexpected workflow task
    failure", a panic in its log) and fails the Update: nothing is recorded and the session goes
    on, which `after_an_attack` checks.
    """
    message = str(error).lower()
    return ("size" in message or "limit" in message or "larger than max" in message
            or "unexpected workflow task failure" in message)


# -------------------------------------------------------- sessions to attack


class PausedSessions:
    """A paused session, reused for as long as it stays paused on one untouched call."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.handle: WorkflowHandle[Any, Any] | None = None
        self.rules: dict[str, Any] = {}
        self.opener = DELETE
        self.started = 0

    async def paused(self) -> tuple[WorkflowHandle[Any, Any], dict[str, Any], dict[str, Any]]:
        (self.agent.workspace / "notes.txt").write_text("remember the milk\n")
        if self.handle is not None:
            try:
                pending = await self.handle.query("pending", rpc_timeout=timedelta(seconds=5))
            except RPCError:  # wedged by an earlier example, which has failed for it already
                pending = []
            if len(pending) == 1 and not pending[0].get("approvals"):
                return self.handle, pending[0], self.rules
            if (await self.handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await self.handle.terminate("the property test moves on to a fresh session")
        self.opener, self.rules = OPENERS[self.started % len(OPENERS)]
        self.started += 1
        self.handle = await self.agent.start(self.opener, **self.rules)
        status = await wait_for_status(self.handle, lambda s: s["pending"] == 1)
        assert status["state"] == "awaiting_human"
        return self.handle, (await self.handle.query("pending"))[0], self.rules

    async def pause_again(self) -> None:
        """Ask for a new decision in the same session, for the next example."""
        assert self.handle is not None
        (self.agent.workspace / "notes.txt").write_text("remember the milk\n")
        await self.handle.signal("user_message", {"text": self.opener})
        await wait_for_status(self.handle, lambda s: s["pending"] >= 1 or s["state"] == "closed")


_pools: dict[str, PausedSessions] = {}


def pool(agent: Agent) -> PausedSessions:
    return _pools.setdefault(agent.task_queue, PausedSessions(agent))


def allowed_for(rules: dict[str, Any], tool: str | None) -> list[str] | None:
    """Who may approve calls of `tool` under `rules` (None: anyone)."""
    approvers = rules.get("approvers") or {}
    return approvers.get(tool or "", approvers.get("*"))


APPROVALS = ("approved", "edited", "auto_approved")


async def approvals_in(handle: WorkflowHandle[Any, Any]) -> int:
    return sum(event["event"] in APPROVALS for event in await handle.query("audit"))


async def assert_every_approval_was_allowed(
    handle: WorkflowHandle[Any, Any], rules: dict[str, Any], workspace: Path, approvals_before: int | None = None
) -> None:
    """The audit shows only allowed approvals (a remembered one rests on an allowed
    person too); and when no approval was added since `approvals_before`, the
    file (written afresh before each example) is still there."""
    audit = await handle.query("audit")
    # A call that runs on its tool's own setting is audited too, with that rule: no person approved it.
    approvals = [e for e in audit if e["event"] in APPROVALS
                 and not (e["by"] is None and (e.get("rule") or "").startswith("the tool's own setting"))]
    for event in approvals:
        allowed = allowed_for(rules, event["tool"])
        if allowed is not None:
            assert event["by"] in allowed, f"{event['by']!r} approved, but only {allowed} may: {event}"
    if approvals_before is not None and len(approvals) == approvals_before:
        assert (workspace / "notes.txt").exists(), f"notes.txt was deleted without an approval; audit: {audit[-5:]}"


async def settle_what_is_left(handle: WorkflowHandle[Any, Any]) -> None:
    """A sane decision on each call still pending settles it, and the turn then ends."""
    for _ in range(5):
        status = await wait_for_status(handle, lambda s: is_settled(s) or s["pending"] > 0 or s["state"] == "closed")
        if status["pending"] == 0:
            return
        for item in await handle.query("pending"):
            assert await decide_sanely(handle, item) in ("approved", "edited", "rejected", "answered")
    raise AssertionError("the session kept asking")


async def after_an_attack(
    sessions: PausedSessions, rules: dict[str, Any], item: dict[str, Any], approvals_before: int
) -> None:
    assert sessions.handle is not None
    handle, workspace = sessions.handle, sessions.agent.workspace
    answers = await assert_healthy(handle)
    await assert_every_approval_was_allowed(handle, rules, workspace, approvals_before)
    still = [p for p in answers["pending"] if p["call_id"] == item["call_id"]]
    if still:  # the attack changed nothing about it: a sane decision must settle it
        assert await decide_sanely(handle, still[0]) in ("approved", "rejected", "answered")
    await settle_what_is_left(handle)
    await assert_every_approval_was_allowed(handle, rules, workspace)
    status = (await assert_healthy(handle))["status"]
    if status["state"] != "closed":
        await sessions.pause_again()


# ------------------------------------------------------------------- the tests


# Everything is drawn before the session is touched, so a replayed example draws the same.
decisions = st.sampled_from(SIGNALS).flatmap(lambda verb: st.tuples(st.just(verb), payloads(verb)))


@SETTINGS
@given(decision=decisions, how=ENCODINGS)
async def test_no_signal_payload_wedges_a_paused_session(agent: Agent, decision: tuple[str, Any], how: str) -> None:
    verb, drawn = decision
    sessions = pool(agent)
    handle, item, rules = await sessions.paused()
    payload = resolve(drawn, item["call_id"])
    refused_before = sum(e["event"] == "refused" for e in await handle.query("audit"))
    approvals_before = await approvals_in(handle)
    try:
        await handle.signal(verb, encode(payload, how))
    except RPCError as error:  # the server refuses payloads over its limit: nothing reached the session
        assert too_large(error), error
    else:
        if how != "json":  # the README's promise: a malformed payload is listed, never silently dropped
            audit = await handle.query("audit")
            assert sum(e["event"] == "refused" for e in audit) == refused_before + 1, f"{how} {verb} was not listed"
    await after_an_attack(sessions, rules, item, approvals_before)


@SETTINGS
@given(decision=decisions, how=ENCODINGS)
@example(decision=("approve", {"call_id": CURRENT, "comment": "x" * 3_000_000}), how="json")  # over the server's limit
async def test_no_update_payload_wedges_a_paused_session(agent: Agent, decision: tuple[str, Any], how: str) -> None:
    verb, drawn = decision
    sessions = pool(agent)
    handle, item, rules = await sessions.paused()
    payload = encode(resolve(drawn, item["call_id"]), how)
    approvals_before = await approvals_in(handle)
    sender = handle
    if len(payload.payload.data) > MAX_UPDATE_REQUEST_BYTES - NEAR_THE_LIMIT_BYTES:
        # The server answers RESOURCE_EXHAUSTED, which the SDK retries with backoff for as long
        # as a busy machine makes each 2 MB attempt last: ask once and take the first answer.
        sender = (await without_rpc_retries(agent.client)).get_workflow_handle(handle.id)
    try:
        reply = await asyncio.wait_for(sender.execute_update(f"{verb}_update", payload), ANSWER_SECONDS)
    except (asyncio.TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):  # the latter: cancelled by wait_for
        await assert_healthy(handle)  # names the failed workflow task, if that is why
        raise AssertionError(f"{verb}_update got no answer within {ANSWER_SECONDS} s") from None
    except WorkflowUpdateFailedError:
        pass  # refused with a reason: what an Update is for
    except RPCError as error:
        assert too_large(error), error
    else:
        assert how == "json", f"an undecodable {verb}_update was accepted: {reply}"
        assert reply["accepted"] is True
    await after_an_attack(sessions, rules, item, approvals_before)


SESSION_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "message": texts | anything,
    "by": names | anything,
    "system_prompt": texts | anything,
    "model": names | anything,
    "tools": st.lists(st.sampled_from(["delete_file", "search_web", "*"]) | names, max_size=3) | anything,
    "max_steps": integers | anything,
    "approval_timeout_seconds": durations,
    "answer_timeout_seconds": durations,
    "idle_timeout_seconds": durations,
    "remind_after_seconds": durations,
    "escalate_after_seconds": durations,
    "escalate_to": st.lists(names, max_size=3) | anything,
    "continue_as_new_after_events": integers | anything,
    "approvers": st.dictionaries(st.sampled_from(["delete_file", "*"]) | keys, st.lists(names, max_size=3), max_size=2) | anything,
    "required_approvals": st.dictionaries(st.sampled_from(["delete_file", "*"]) | keys, integers, max_size=2) | anything,
    "four_eyes": st.booleans() | anything,
    "auto_approve": st.lists(st.sampled_from(["search_web", "book_flight"]) | short_text, max_size=2) | anything,
    "require_approval": st.lists(st.sampled_from(["*", "delete_file"]) | short_text, max_size=2) | anything,
    "carried": st.one_of(st.just(FORGED_CARRIED), st.dictionaries(st.sampled_from(list(FORGED_CARRIED)), anything, max_size=3), anything),
    **{name: anything for name in CONTINUE_AS_NEW_FIELDS},
}
ONLY_CONTINUE_AS_NEW = {"carried", *CONTINUE_AS_NEW_FIELDS}


async def refusal_of(handle: WorkflowHandle[Any, Any]) -> str | None:
    """Why the start was refused, or None while the session is alive."""
    if (await handle.describe()).status != WorkflowExecutionStatus.FAILED:
        return None
    try:
        await handle.result()
    except WorkflowFailureError as failure:
        return failure.cause.message
    raise AssertionError("a failed session gave a result")


async def start_outcome(handle: WorkflowHandle[Any, Any], timeout: float = 60) -> str | None:
    """The refusal of a start, or None once the session has paused or finished its first turn."""
    timeout *= PATIENCE
    deadline = asyncio.get_running_loop().time() + timeout
    status: Any = None
    while (reason := await refusal_of(handle)) is None:
        try:
            status = await handle.query("status", rpc_timeout=timedelta(seconds=5))
        except (WorkflowQueryFailedError, RPCError) as error:
            status = error  # not answering yet (its first task), or refused meanwhile: look again
        if isinstance(status, dict) and (status["pending"] > 0 or is_settled(status)):
            return await refusal_of(handle)
        await assert_no_failed_workflow_task(handle)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the session neither paused, finished its turn nor was refused: {status}")
        await asyncio.sleep(0.1)
    return reason


@SETTINGS
@given(overrides=st.fixed_dictionaries({}, optional=SESSION_FIELDS), how=ENCODINGS)
async def test_no_start_input_wedges_a_session(agent: Agent, overrides: dict[str, Any], how: str) -> None:
    (agent.workspace / "notes.txt").write_text("remember the milk\n")
    start_input = {"message": DELETE, "approvers": {"delete_file": ["oncall"]}, **overrides}
    try:
        handle = await agent.client.start_workflow(
            "AgentWorkflow", encode(start_input, how), id=f"property-{uuid.uuid4().hex[:10]}", task_queue=agent.task_queue
        )
    except RPCError as error:  # over the server's payload limit: no session was started
        assert too_large(error), error
        return
    reason = await start_outcome(handle)
    forged = ONLY_CONTINUE_AS_NEW & set(overrides)
    if forged or how != "json":
        assert reason is not None, f"a start input with {sorted(forged) or how} was not refused"
    if reason is not None:
        assert reason.startswith("invalid session input"), reason
        await assert_healthy(handle)  # even a refused session answers its queries
        return
    await assert_healthy(handle)
    policy_runs_it = "delete_file" in json.dumps(overrides.get("auto_approve"))
    if not policy_runs_it:
        audit = await handle.query("audit")
        ran = [e for e in audit if e["event"] in ("approved", "edited", "auto_approved")]
        assert ran or (agent.workspace / "notes.txt").exists(), f"deleted without a decision: {audit}"
    await settle_what_is_left(handle)
    await assert_healthy(handle)
    if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
        await handle.terminate("the property test is done with it")


pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(autouse=True)
def _forget_reused_sessions() -> None:
    _pools.clear()
