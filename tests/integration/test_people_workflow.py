"""The workflow side of reaching people: search attributes and memo for inboxes, claims,
verified decisions, the event stream and waiting for a session to settle."""

from __future__ import annotations

import asyncio
import json
import re
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from hitl.devserver import temporal_binary
from tests.support.sessions import Agent, eventually, pending_items, query, refused_update, settled
from workflows.proofs import sign_decision
from workflows.rules import args_sha256
from workflows.visibility import MEMO_KEY


async def visible(agent: Agent, session_id: str) -> Any:
    async for execution in agent.client.list_workflows(f"WorkflowId = '{session_id}'"):
        return execution
    return None


async def test_a_paused_session_is_found_by_one_visibility_list_with_its_pending_items(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", approvers={"delete_file": ["ana", "bo"]})
    [item] = await pending_items(session)

    async def listed() -> list[Any]:
        return [e async for e in agent.client.list_workflows(
            f"HitlState = 'awaiting_human' AND HitlApprovers = 'ana' AND TaskQueue = '{agent.task_queue}'")]

    [execution] = await eventually(listed, lambda found: len(found) == 1)
    attributes = execution.typed_search_attributes
    assert {str(pair.key.name): pair.value for pair in attributes}["HitlPendingTools"] == ["delete_file"]
    waiting_since = next(pair.value for pair in attributes if pair.key.name == "HitlWaitingSince")
    assert abs(waiting_since - datetime.fromisoformat(item["requested_at"])) < timedelta(seconds=1)
    [shown] = (await execution.memo())[MEMO_KEY]
    assert shown["call_id"] == item["call_id"] and shown["args"] == {"path": "notes.txt"}
    assert shown["approvers"] == ["ana", "bo"]

    await session.execute_update("reject_update", {"call_id": item["call_id"], "by": "ana", "reason": "no"})
    await settled(session)
    execution = await eventually(lambda: visible(agent, session.id), lambda e: e is not None and
                                 {p.key.name: p.value for p in e.typed_search_attributes}.get("HitlState") == "idle")
    names = {pair.key.name for pair in execution.typed_search_attributes}
    assert "HitlWaitingSince" not in names and "HitlPendingTools" not in names
    assert MEMO_KEY not in await execution.memo()


async def test_search_attributes_are_upserted_only_when_they_change(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt", remind_after_seconds=1)
    [item] = await pending_items(session)
    for n in range(3):  # reminders wake the pause, refusals and queries come: nothing an inbox shows changes
        await session.signal("approve", {"call_id": f"nope-{n}"})
        await query(session, "status")
        await asyncio.sleep(1.2)
    assert len([e for e in await query(session, "audit") if e["event"] == "refused"]) == 3
    await session.execute_update("approve_update", {"call_id": item["call_id"]})
    await settled(session)
    events = (await session.fetch_history()).events
    upserts = [e for e in events if e.HasField("upsert_workflow_search_attributes_event_attributes") and any(
        name.startswith("Hitl") for name in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)]
    memos = [set(e.workflow_properties_modified_event_attributes.upserted_memo.fields) for e in events
             if e.HasField("workflow_properties_modified_event_attributes")]
    # running (start), awaiting_human with the tool, running without it, idle
    shown = [dict(e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields) for e in upserts]
    assert len(upserts) == 4, [{k: v.data for k, v in fields.items()} for fields in shown]
    assert memos.count({"hitl_session"}) == 1  # who the session belongs to, once as it starts
    assert memos.count({"hitl_pending"}) == 2  # the item appears, the item goes


async def test_a_claim_keeps_others_from_deciding_until_released(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)
    claimed = await session.execute_update("claim_update", {"call_id": item["call_id"], "by": "ana", "for_seconds": 600})
    assert claimed["claimed_by"] == "ana"
    [shown] = await query(session, "pending")
    assert shown["claimed_by"] == "ana"
    assert re.search("claimed by ana", await refused_update(session, "approve_update", {"call_id": item["call_id"], "by": "bo"}))
    assert re.search("claimed by ana", await refused_update(session, "claim_update", {"call_id": item["call_id"], "by": "bo"}))
    await session.signal("approve", {"call_id": item["call_id"], "by": "bo"})  # refused, recorded
    assert re.search("only they can release", await refused_update(session, "release_update", {"call_id": item["call_id"], "by": "bo"}))
    await session.execute_update("release_update", {"call_id": item["call_id"], "by": "ana"})
    await session.execute_update("reject_update", {"call_id": item["call_id"], "by": "bo", "reason": "mine now"})
    await settled(session)
    audit = [(e["event"], e.get("by")) for e in await query(session, "audit")]
    assert ("claimed", "ana") in audit and ("released", "ana") in audit and ("rejected", "bo") in audit
    assert any(event == "refused" and by == "bo" for event, by in audit)


async def test_a_claim_expires_by_itself(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)
    await session.execute_update("claim_update", {"call_id": item["call_id"], "by": "ana", "for_seconds": 1})
    answers: list[Any] = []

    async def reject_as_bo() -> Any:
        """bo's rejection, refused while ana's claim holds (a refused Update leaves no trace in history)."""
        try:
            answers.append(await session.execute_update(
                "reject_update", {"call_id": item["call_id"], "by": "bo", "reason": "expired"}))
        except WorkflowUpdateFailedError as refused:
            answers.append(str(refused.cause))
        return answers[-1]

    await eventually(reject_as_bo, lambda answer: isinstance(answer, dict))
    assert all("claimed by ana" in answer for answer in answers[:-1])
    assert answers[-1]["outcome"] == "rejected"
    await settled(session)


async def test_waiting_until_settled_answers_with_the_first_pause(agent: Agent) -> None:
    from workflows.agent import AgentWorkflow
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    start = WithStartWorkflowOperation(
        AgentWorkflow.run, {"message": "please delete notes.txt"}, id=f"settle-{os.getpid()}-{id(agent)}",
        task_queue=agent.task_queue, id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
    )
    outcome = await agent.client.execute_update_with_start_workflow("wait_until_settled", {}, start_workflow_operation=start)
    assert outcome["status"]["state"] == "awaiting_human"
    [item] = outcome["pending"]
    session = await start.workflow_handle()
    await session.execute_update("approve_update", {"call_id": item["call_id"]})
    after = outcome["event"]
    accepted = await session.execute_update("user_message_update", {"text": "what is 2+2?"})
    again = await session.execute_update("wait_until_settled", {"after_event": accepted["event"]})
    assert again["status"]["state"] == "idle" and again["event"] > after


async def test_the_event_stream_tells_what_happened_in_order(agent: Agent) -> None:
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)
    await session.execute_update("approve_update", {"call_id": item["call_id"]})
    await settled(session)
    page = await session.query("events", {"after": 0})
    types = [event["type"] for event in page["events"]]
    ids = [event["id"] for event in page["events"]]
    assert ids == list(range(1, len(ids) + 1)) and page["last"] == ids[-1]
    for expected in ("message", "state", "pause_opened", "pause_settled", "tool_result", "answer"):
        assert expected in types, types
    assert types.index("pause_opened") < types.index("pause_settled") < types.index("tool_result") < types.index("answer")
    [result] = [event for event in page["events"] if event["type"] == "tool_result"]
    assert result["data"]["tool"] == "delete_file" and result["data"]["call_id"] == item["call_id"]
    later = await session.query("events", {"after": ids[-3]})
    assert [event["id"] for event in later["events"]] == ids[-2:]


# ------------------------------------------------------------ verified decisions


def run_of(session: Any) -> str:
    """The run a handle names (the one it started, or the one it was made for)."""
    return session.run_id or session.result_run_id or session.first_execution_run_id


def chain_of(session: Any) -> str:
    """The chain of runs a handle's session is in: its first run (a handle made for a later run of
    it, a reset's, names the first with `first_execution_run_id`)."""
    return session.first_execution_run_id or run_of(session)


def proof_for(key: Any, session: Any, item: dict[str, Any], action: str, by: str,
              decision: dict[str, Any] | None = None, **overrides: Any) -> str:
    """What the API signs: the session's run and chain of runs, the call, the verb, the arguments and
    the whole decision."""
    from workflows.decisions import parse_decision

    fields = dict(session_id=session if isinstance(session, str) else session.id, call_id=item["call_id"],
                  action=action, by=by, args_sha256=item["args_sha256"],
                  decision_sha256=parse_decision(action, dict(decision or {})).digest(),
                  run_id=None if isinstance(session, str) else run_of(session),
                  chain=None if isinstance(session, str) else chain_of(session))
    fields.update(overrides)
    return sign_decision(key, "local", **fields)


@pytest.fixture
def signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from hitl import decision_keys

    monkeypatch.setenv("HITL_KEYS_DIR", str(tmp_path / "keys"))
    monkeypatch.delenv("HITL_SIGNING_KEY", raising=False)
    monkeypatch.delenv("HITL_TRUSTED_KEYS", raising=False)
    return decision_keys.signing_key()[1]


async def cli(env: WorkflowEnvironment, *args: str) -> tuple[int, str]:
    """The `temporal` CLI, run without blocking the worker that shares this event loop."""
    address = env.client.service_client.config.target_host
    process = await asyncio.create_subprocess_exec(
        str(temporal_binary()), *args, "--address", address, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, output.decode()


async def test_a_forged_by_through_the_cli_is_refused_on_a_verified_session(
    env: WorkflowEnvironment, agent: Agent, signing_key: Any
) -> None:
    session = await agent.start("please delete notes.txt", verified_decisions=True, approvers={"delete_file": ["ana"]})
    [item] = await pending_items(session)
    signal = await cli(env, "workflow", "signal", "--workflow-id", session.id, "--name", "approve",
                 "--input", json.dumps({"call_id": item["call_id"], "by": "ana"}))
    assert signal[0] == 0, signal[1]
    update = await cli(env, "workflow", "update", "execute", "--workflow-id", session.id, "--name", "approve_update",
                 "--input", json.dumps({"call_id": item["call_id"], "by": "ana"}))
    assert update[0] != 0 and "carries no proof" in update[1], update
    assert len(await query(session, "pending")) == 1
    refused = [e for e in await query(session, "audit") if e["event"] == "refused"]
    assert len(refused) == 2 and all("no proof" in e["reason"] for e in refused), refused

    other = proof_for(signing_key, session, item, "approve", "ana", args_sha256=args_sha256({"path": "other.txt"}))
    assert re.search("other arguments", await refused_update(session, "approve_update", {"call_id": item["call_id"], "proof": other}))
    stale = proof_for(signing_key, session, item, "approve", "ana", now=datetime.now(timezone.utc) - timedelta(hours=1))
    assert re.search("issued at", await refused_update(session, "approve_update", {"call_id": item["call_id"], "proof": stale}))
    wrong_verb = proof_for(signing_key, session, item, "reject", "ana")
    assert re.search("not to approve", await refused_update(session, "approve_update", {"call_id": item["call_id"], "proof": wrong_verb}))

    good = proof_for(signing_key, session, item, "approve", "ana")
    result = await session.execute_update("approve_update", {"call_id": item["call_id"], "by": "mallory", "proof": good})
    assert result["outcome"] == "approved"
    await settled(session)
    approved = [e for e in await query(session, "audit") if e["event"] == "approved"]
    assert [e["by"] for e in approved] == ["ana"]
    assert not (agent.workspace / "notes.txt").exists()


async def test_a_proof_counts_once_and_only_for_its_session(env: WorkflowEnvironment, agent: Agent, signing_key: Any) -> None:
    first = await agent.start("please delete notes.txt", verified_decisions=True,
                              approvers={"delete_file": ["ana", "bo"]}, required_approvals={"delete_file": 2})
    [item] = await pending_items(first)
    vote = proof_for(signing_key, first, item, "approve", "ana")
    await first.execute_update("approve_update", {"call_id": item["call_id"], "proof": vote})
    assert re.search("already used|already approved", await refused_update(first, "approve_update", {"call_id": item["call_id"], "proof": vote}))
    second = await agent.start("please delete notes.txt", verified_decisions=True)
    [other] = await pending_items(second)
    assert re.search("another session", await refused_update(second, "approve_update", {"call_id": other["call_id"], "proof": proof_for(
            signing_key, first, other, "approve", "ana")}))
    assert len(await query(first, "pending")) == 1 and len(await query(second, "pending")) == 1


async def test_a_verified_session_without_a_trusted_key_is_refused_at_start(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_KEYS_DIR", str(tmp_path / "no-keys"))
    monkeypatch.delenv("HITL_SIGNING_KEY", raising=False)
    monkeypatch.delenv("HITL_TRUSTED_KEYS", raising=False)
    session = await agent.start("please delete notes.txt", verified_decisions=True)
    with pytest.raises(WorkflowFailureError) as failure:
        await session.result()
    assert "verified_decisions needs a worker that trusts" in str(failure.value.cause)


async def test_on_a_verified_session_a_message_needs_a_proof_of_its_author(agent: Agent, signing_key: Any) -> None:
    """Four-eyes compares who asked with who approves: an author anyone could type would let
    ana ask 'as bo' straight through Temporal and then approve her own request."""
    from workflows.proofs import MESSAGE_CALL_ID

    session = await agent.start("what is 2+2?", verified_decisions=True, four_eyes=True, by="ana")
    await settled(session)
    text = "please delete notes.txt"
    assert "carries no proof" in await refused_update(session, "user_message_update", {"text": text, "by": "bo"})
    await session.signal("user_message", {"text": text, "by": "bo"})
    from workflows.identity import message_digest
    from workflows.session import UserMessage

    as_ana = sign_decision(signing_key, "local", session_id=session.id, call_id=MESSAGE_CALL_ID, action="message",
                           by="ana", args_sha256=args_sha256({"text": text}),
                           decision_sha256=message_digest(UserMessage(text=text)),
                           run_id=run_of(session), chain=chain_of(session))
    assert "another text" in await refused_update(session, "user_message_update", {"text": "delete all", "proof": as_ana})
    await session.execute_update("user_message_update", {"text": text, "by": "bo", "proof": as_ana})
    [item] = await pending_items(session)
    assert item["requested_by"] == "ana"
    own = proof_for(signing_key, session, item, "approve", "ana")
    assert "four-eyes" in await refused_update(session, "approve_update", {"call_id": item["call_id"], "proof": own})
    await session.execute_update("approve_update", {"call_id": item["call_id"], "proof": proof_for(
        signing_key, session, item, "approve", "bo")})
    await settled(session)
    transcript = await query(session, "transcript")
    assert [m["content"] for m in transcript if m["role"] == "user"] == ["what is 2+2?", text]


def test_a_session_full_of_fresh_proofs_refuses_new_ones_rather_than_forget_one(signing_key: Any) -> None:
    """Forgetting the oldest spent proof would let it count twice while it is still fresh."""
    from workflows.identity import SPENT_KEPT, ProofRefusal, SpentProof, Verifier
    from workflows.decisions import Approve
    from workflows.pauses import PendingCall
    from workflows.proofs import public_key_b64

    now = datetime.now(timezone.utc)
    item = PendingCall(call_id="c1", kind="approval", tool="delete_file", args={"path": "a"},
                       args_sha256=args_sha256({"path": "a"}), requested_at=now)
    verifier = Verifier(required=True, trusted_keys={"local": public_key_b64(signing_key)})
    first = Approve(call_id="c1", proof=proof_for(signing_key, "s", item.model_dump(mode="json"), "approve", "ana"))
    _, spent = verifier.check(first, "s", [item], now)
    verifier.spend(spent, now)
    verifier.spent += [SpentProof(nonce=f"n{i}", issued_at=int(now.timestamp())) for i in range(SPENT_KEPT)]
    fresh = Approve(call_id="c1", proof=proof_for(signing_key, "s", item.model_dump(mode="json"), "approve", "bo"))
    with pytest.raises(ProofRefusal, match="try again"):
        verifier.check(fresh, "s", [item], now)
    with pytest.raises(ProofRefusal, match="already used"):
        verifier.check(first, "s", [item], now)
    later = now + timedelta(minutes=40)  # the window has passed: the memory empties as proofs age out
    stale_proofs_gone = Verifier(required=True, trusted_keys=verifier.trusted_keys, spent=verifier.spent)
    stale_proofs_gone.spend(SpentProof(nonce="x", issued_at=int(later.timestamp())), later)
    assert len(stale_proofs_gone.spent) == 1
