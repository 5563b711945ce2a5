"""The inbox: every call waiting for a person across sessions, from one visibility list.

Stories through a real dev server and worker, read the way people read it:
`python starter.py inbox [--for P] --json` as a subprocess.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput
from temporalio.testing import WorkflowEnvironment

import hitl.client.inbox

from activities.offline_model import OfflineModel
from hitl.client.inbox import InboxItem, for_person, read_inbox
from tests.support.sessions import Agent, eventually, pending_items
from tests.integration.test_cli import starter
from hitl.worker import build_worker

DELETE = "please delete notes.txt"


async def inbox_rows(agent: Agent, *options: str) -> list[dict[str, Any]]:
    completed = await starter(agent, "inbox", "--task-queue", agent.task_queue, "--json", *options)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


async def rows_until(agent: Agent, options: tuple[str, ...], sessions: list[str]) -> list[dict[str, Any]]:
    """Visibility follows the sessions by a moment: read until the rows name exactly `sessions`, in order."""
    async def read() -> list[dict[str, Any]]:
        return await inbox_rows(agent, *options)

    return await eventually(read, lambda rows: [row["session_id"] for row in rows] == sessions, timeout=60, every=0.3)


async def paused(agent: Agent, session_id: str, message: str = DELETE, **options: Any) -> dict[str, Any]:
    handle = await agent.start(message, session_id=session_id, **options)
    [item] = await pending_items(handle)
    return item


async def test_every_waiting_call_is_listed_oldest_first_and_each_person_sees_what_they_may_decide(agent: Agent) -> None:
    tag = agent.task_queue
    anyone, oncall, own = f"{tag}-anyone", f"{tag}-oncall", f"{tag}-own"
    await paused(agent, anyone, by="carol")
    await paused(agent, oncall, by="carol", approvers={"delete_file": ["ana"]})
    await paused(agent, own, by="ana", four_eyes=True)

    rows = await rows_until(agent, (), [anyone, oncall, own])
    for row in rows:
        assert (row["kind"], row["tool"], row["args"], row["call_id"]) == ("approval", "delete_file", {"path": "notes.txt"}, "call_1")
        assert 0 <= row["age_seconds"] < 120 and row["claimed_by"] is None
    assert [row["approvers"] for row in rows] == [None, ["ana"], None]
    assert rows[2]["requested_by"] == "ana" and rows[2]["four_eyes"] is True

    # ana may not approve her own request under four eyes; bob is not on call.
    assert [row["session_id"] for row in await inbox_rows(agent, "--for", "ana")] == [anyone, oncall]
    assert [row["session_id"] for row in await inbox_rows(agent, "--for", "bob")] == [anyone, own]

    # bob takes the open call: ana no longer sees it, unless she asks to see claims.
    claimed = await agent.client.get_workflow_handle(anyone).execute_update("claim_update", {"call_id": "call_1", "by": "bob"})
    assert claimed["claimed_by"] == "bob"
    await rows_until(agent, ("--for", "ana"), [oncall])
    [shown, _] = await inbox_rows(agent, "--for", "ana", "--claimed")
    assert shown["session_id"] == anyone and shown["claimed_by"] == "bob" and shown["claim_until"]
    assert [row["session_id"] for row in await inbox_rows(agent, "--for", "bob")] == [anyone, own]

    # Decided calls leave the inbox.
    await agent.client.get_workflow_handle(oncall).execute_update("approve_update", {"call_id": "call_1", "by": "ana"})
    await rows_until(agent, (), [anyone, own])


async def test_one_vote_of_two_leaves_the_call_to_the_other_approver(agent: Agent) -> None:
    session = f"{agent.task_queue}-two"
    await paused(agent, session, by="carol", approvers={"delete_file": ["ana", "bob"]}, required_approvals={"delete_file": 2})
    await rows_until(agent, ("--for", "ana"), [session])
    await agent.client.get_workflow_handle(session).execute_update("approve_update", {"by": "ana"})

    [row] = await rows_until(agent, ("--for", "bob"), [session])
    assert row["approvals"] == ["ana"] and row["required_approvals"] == 2
    await rows_until(agent, ("--for", "ana"), [])
    text = await starter(agent, "inbox", "--task-queue", agent.task_queue, "--for", "ana")
    assert text.returncode == 0 and text.stdout.strip() == "nothing waits for ana (1 waiting session looked at)", text.stdout


class NoQueries(Interceptor):
    """A client that fails any query: what reads through it asks no session."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        class Refusing(OutboundInterceptor):
            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                raise AssertionError(f"queried {input.id} for {input.query}")

        return Refusing(next)


async def test_the_inbox_answers_from_visibility_while_no_worker_runs(env: WorkflowEnvironment, workspace: Path) -> None:
    """No query per session: with the worker gone, a query could not be answered (it would wait out
    the CLI's 60 s), the inbox still is; read in-process through a client that refuses every query."""
    task_queue = f"inbox-offline-{int(time.time() * 1000)}"
    agent = Agent(env.client, task_queue, workspace)
    async with build_worker(env.client, task_queue, OfflineModel(), workspace):
        for n in range(3):
            await paused(agent, f"{task_queue}-{n}")
        await rows_until(agent, (), [f"{task_queue}-{n}" for n in range(3)])
    rows = await inbox_rows(agent)
    assert [row["session_id"] for row in rows] == [f"{task_queue}-{n}" for n in range(3)]
    refusing = Client(**{**env.client.config(), "interceptors": [NoQueries()]})
    inbox = await read_inbox(refusing, task_queue=task_queue)
    assert [item.session_id for item in inbox.items] == [f"{task_queue}-{n}" for n in range(3)]


async def test_a_session_that_was_terminated_while_waiting_is_not_listed(agent: Agent) -> None:
    """A terminated session keeps its last search attributes; nobody can decide its calls any more."""
    gone, waiting = f"{agent.task_queue}-gone", f"{agent.task_queue}-waiting"
    await paused(agent, gone)
    await paused(agent, waiting)
    await rows_until(agent, (), [gone, waiting])
    await agent.client.get_workflow_handle(gone).terminate("test")
    await rows_until(agent, (), [waiting])


def test_a_person_sees_what_the_rules_let_them_decide() -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def item(call_id: str, **fields: Any) -> InboxItem:
        return InboxItem(session_id="s", call_id=call_id, kind="approval", tool="t", args={}, args_sha256="",
                         requested_at=now, **fields)

    items = [
        item("open"),
        item("not-hers", approvers=["bob"]),
        item("hers", approvers=["ana", "bob"]),
        item("own-request", four_eyes=True, requested_by="ana"),
        item("own-no-four-eyes", requested_by="ana"),
        item("voted", required_approvals=2, approvals=["ana"]),
        item("claimed-by-bob", claimed_by="bob", claim_until=now + timedelta(minutes=5)),
        item("claim-expired", claimed_by="bob", claim_until=now - timedelta(seconds=1)),
        item("claimed-by-her", claimed_by="ana", claim_until=now + timedelta(minutes=5)),
    ]
    seen = [i.call_id for i in for_person(items, "ana", now)]
    assert seen == ["open", "hers", "own-no-four-eyes", "claim-expired", "claimed-by-her"]
    with_claims = [i.call_id for i in for_person(items, "ana", now, show_claimed=True)]
    assert with_claims == ["open", "hers", "own-no-four-eyes", "claimed-by-bob", "claim-expired", "claimed-by-her"]


async def test_the_inbox_module_reads_memos_not_queries(agent: Agent) -> None:
    """The API's `GET /inbox` calls read_inbox directly: rows are typed, ages computed at the read."""
    session = f"{agent.task_queue}-typed"
    item = await paused(agent, session)

    async def read() -> Any:
        return await read_inbox(agent.client, task_queue=agent.task_queue)

    inbox = await eventually(read, lambda found: len(found.items) == 1)
    [row] = inbox.items
    assert row.session_id == session and row.args_sha256 == item["args_sha256"] and not row.args_truncated
    assert inbox.sessions == 1 and inbox.unreadable == []
    assert row.age_seconds == (inbox.read_at - row.requested_at).total_seconds()



async def test_when_many_sessions_wait_the_inbox_reads_the_oldest_first_and_says_it_shows_part(
    agent: Agent, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past WHOLE_LIST_UP_TO waiting sessions, counts find the oldest and one short list reads them
    (10,000 in bench/load.py; here the threshold is lowered to see the same path with five)."""
    monkeypatch.setattr(hitl.client.inbox, "WHOLE_LIST_UP_TO", 0)
    tag = agent.task_queue
    sessions = [f"{tag}-{n}" for n in range(5)]
    for n, session in enumerate(sessions):
        await paused(agent, session, by="carol", **({"approvers": {"delete_file": ["bob"]}} if n < 2 else {}))
    whole = await eventually(lambda: read_inbox(agent.client, task_queue=tag, limit=None),
                             lambda inbox: len(inbox.items) == 5)
    assert whole.complete and [item.session_id for item in whole.items] == sessions

    # The search stops once between `limit` and four times as many sessions waited by its moment:
    # with a limit of 2 all five may be listed (how many depends on when each paused); with 1, at most 4.
    oldest = await read_inbox(agent.client, task_queue=tag, limit=1)
    assert [item.session_id for item in oldest.items] == sessions[:1]
    assert not oldest.complete and oldest.waiting_sessions == 5 and 1 <= oldest.sessions <= 4
    two = await read_inbox(agent.client, task_queue=tag, limit=2)
    assert [item.session_id for item in two.items] == sessions[:2] and not two.complete

    # ana may not decide the two oldest (bob's): her first page comes from further on.
    hers = await read_inbox(agent.client, task_queue=tag, person="ana", limit=2)
    assert [item.session_id for item in hers.items] == sessions[2:4] and hers.waiting_sessions == 3

    text = await starter(agent, "inbox", "--task-queue", tag, "--limit", "2")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1] == "(the oldest 2, of 5 waiting sessions; --limit 0 shows them all)", text.stdout
