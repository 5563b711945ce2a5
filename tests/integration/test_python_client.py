"""HitlClient beyond the happy path (docs/interface.md, "Driving sessions from Python"): no worker
polling says so at once, and an edit names only what changes, pinned to the arguments it was
based on. The command line's `approve --set` goes through the same client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl import HitlClient, Refused
from hitl.testing import Harness
from tests.support.stack import ROOT, product_env

TOOLS = ["tests.support.refund_tools"]
# A guard against a hang, not a speed test: the client's look for a worker lasts about three seconds.
FAST_ENOUGH_SECONDS = 30
# Under the two query deadlines (10 s each) the old `settled()` waited out, six times the look for
# a worker, so a busy machine does not fail it.
SOONER_THAN_A_QUERY_DEADLINE_SECONDS = 18


def no_worker_text(task_queue: str) -> str:
    return (f"no worker polls task queue {task_queue}: start one with `python worker.py` "
            f"(HITL_TASK_QUEUE={task_queue}, and the same TEMPORAL_ADDRESS and namespace)")


async def test_with_no_worker_every_read_and_decision_says_so_in_one_line(env: WorkflowEnvironment) -> None:
    """`session.pending()` with no worker waited for the query's deadline and raised a bare
    `Timeout expired`; `settled()` and `approve()` waited for ever. Each says what to start."""
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    session = await HitlClient(env.client, queue).start("hello")
    reads: dict[str, Any] = {
        "pending": session.pending, "status": session.status, "transcript": session.transcript,
        "audit": session.audit, "settled": session.settled, "approve": lambda: session.approve("call_1", by="ana"),
        "message": lambda: session.message("anyone there?"),
    }
    for name, read in reads.items():
        try:
            await asyncio.wait_for(read(), FAST_ENOUGH_SECONDS)
        except HitlClient.NoWorker as error:
            assert str(error) == no_worker_text(queue), (name, str(error))
        except asyncio.TimeoutError:
            raise AssertionError(f"{name}: no answer within {FAST_ENOUGH_SECONDS} s, and no word of the missing worker")
        else:
            raise AssertionError(f"{name}: answered with no worker polling")


async def test_with_no_worker_settled_says_so_as_soon_as_a_read_does(env: WorkflowEnvironment) -> None:
    """`settled()` asked the session's last event first, a query that waited for its deadline (10 s,
    twice) before the status read said what was missing. The bound is well under that wait and
    well over the client's look for a worker (about three seconds)."""
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    session = await HitlClient(env.client, queue).start("hello")
    with pytest.raises(HitlClient.NoWorker) as missing:
        await asyncio.wait_for(session.settled(), SOONER_THAN_A_QUERY_DEADLINE_SECONDS)
    assert str(missing.value) == no_worker_text(queue)


async def test_a_worker_that_just_stopped_is_named_as_missing_not_the_servers_words(
        env: WorkflowEnvironment, tmp_path: Path) -> None:
    """For two minutes after its worker stopped, the server still lists its poller: a read waited for
    its query's deadline and then raised that timeout, or the server's own "no poller seen for task
    queue recently", instead of the line that says what to start."""
    script = [{"say": "Hello."}]
    async with Harness(script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("hi")
        await session.settled()
    reads = {"pending": session.pending, "status": session.status, "settled": session.settled}
    for name, read in reads.items():
        with pytest.raises(HitlClient.NoWorker) as missing:
            await asyncio.wait_for(read(), FAST_ENOUGH_SECONDS)
        assert str(missing.value) == no_worker_text(h.task_queue), (name, str(missing.value))


async def test_an_edit_names_only_what_changes_and_is_pinned_to_what_it_read(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """`approve(changes={"amount": 90})` keeps the order id the model sent; an edit based on
    arguments another approver has since changed is refused as stale, and nothing is applied."""
    policy = {"tools": {"refund_payment": {"approval": "always", "required_approvals": 2}}}
    script = [{"call": "refund_payment", "args": {"order_id": "S-1", "amount": 250}}, {"say": "Done."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, policy=policy, client=env.client) as h:
        session = await h.client.start("refund S-1", by="bob")
        await session.settled()
        [seen] = await session.pending()
        first = await session.approve(seen.call_id, by="ana", changes={"amount": 200})
        assert (first.outcome, first.approvals) == ("awaiting_more_approvals", ["ana"]), first
        [now] = await session.pending()
        assert now.args == {"order_id": "S-1", "amount": 200}, now
        with pytest.raises(Refused) as stale:
            await session.approve(seen.call_id, by="carol", changes={"amount": 90}, expected_args_sha256=seen.args_sha256)
        assert stale.value.code == "conflict" and "stale decision" in stale.value.reason, stale.value
        assert (await session.pending())[0].args == {"order_id": "S-1", "amount": 200}, "nothing was applied"


async def test_a_whole_replacement_missing_a_field_says_how_to_change_one(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """`args` replaces all of the call's arguments: the refusal of `{"amount": 90}` on a two-argument
    tool said only `order_id: Field required`; it says how to change one."""
    script = [{"call": "refund_payment", "args": {"order_id": "S-2", "amount": 250}}, {"say": "Done."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("refund S-2")
        await session.settled()
        with pytest.raises(Refused) as partial:
            await session.approve("call_1", by="ana", args={"amount": 90})
    assert partial.value.code == "invalid", partial.value
    assert "order_id: Field required" in partial.value.reason, partial.value
    assert "args replaces all of the call's arguments; to change one, use --set k=v" in partial.value.reason, partial.value


async def test_approve_set_on_the_command_line_changes_one_argument(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """`approve --set amount=90 --set note=...`: each value JSON when it parses, else a string; the
    rest as the model sent it; the change shown before it is sent."""
    script = [{"call": "refund_payment", "args": {"order_id": "S-3", "amount": 250}}, {"say": "Done."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("refund S-3", session_id=f"set-{tmp_path.name}")
        await session.settled()
        shell = {"TEMPORAL_ADDRESS": env.client.service_client.config.target_host, "HITL_TASK_QUEUE": h.task_queue}
        bad = await starter(shell, "approve", session.id, "--set", "amount")
        assert bad.returncode == 2 and "--set" in bad.stderr and "k=v" in bad.stderr, bad.stderr
        unread = await starter(shell, "approve", session.id, "--call", "no-such-call", "--set", "amount=90")
        assert unread.returncode == 2 and "nothing was sent" in unread.stderr, unread.stderr
        approved = await starter(shell, "approve", session.id, "--set", "amount=90", "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        assert "edit: amount: 250 -> 90" in approved.stdout and "order_id" not in approved.stdout, approved.stdout
        assert "outcome=edited" in approved.stdout, approved.stdout
        assert (await session.settled()).last_answer == "Done."
        results = {m["tool_call_id"]: m["content"] for m in await session.transcript() if m["role"] == "tool"}
    assert results["call_1"].endswith("Refunded 90.00 on order S-3."), results


async def starter(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, [sys.executable, "starter.py", *args], cwd=ROOT,
                                   env=product_env(**shell), capture_output=True, text=True, timeout=120)


def test_set_values_are_json_when_they_parse_else_text() -> None:
    from hitl.cli import set_pair

    assert set_pair("amount=90") == ("amount", 90)
    assert set_pair("order_id=A-17") == ("order_id", "A-17")
    assert set_pair('tags=["a", "b"]') == ("tags", ["a", "b"])
    assert set_pair("note=a=b") == ("note", "a=b")
    assert json.dumps(set_pair("flag=true")) == '["flag", true]'
