"""Every message that showed a pause is updated once the pause is settled, wherever it was settled:
a decision, a cancel, the clock. A channel that failed half-way is never made to show twice."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.worker import build_worker
from tests.support.recording_channel import RecordingChannel
from tests.support.sessions import Agent, eventually, pending_items


@asynccontextmanager
async def agent_with(env: WorkflowEnvironment, workspace: Path, channel: RecordingChannel) -> AsyncIterator[Agent]:
    queue = f"settled-{uuid.uuid4().hex[:8]}"
    async with build_worker(env.client, queue, OfflineModel(), workspace, message_channels=[channel]):
        yield Agent(env.client, queue, workspace)


async def updates(channel: RecordingChannel, count: int) -> list[list[str]]:
    return await eventually(lambda: asyncio.sleep(0, channel.updates()),
                            lambda seen: sum(len(updates) for updates in seen) >= count)


async def test_an_approval_updates_the_message_that_showed_the_pause(env: WorkflowEnvironment, workspace: Path) -> None:
    """Given a pause shown to oncall-1, when oncall-1 approves it (as the temporal CLI would), then
    their message says it was approved by them, once, and the tool ran."""
    channel = RecordingChannel()
    async with agent_with(env, workspace, channel) as agent:
        session = await agent.start("please delete notes.txt", approvers={"delete_file": ["oncall-1"]})
        [item] = await pending_items(session)
        await eventually(lambda: asyncio.sleep(0, channel.messages), bool)
        await session.signal("approve", {"call_id": item["call_id"], "by": "oncall-1", "via": "cli"})
        assert await updates(channel, 1) == [["approved by oncall-1 via cli"]]
        await session.signal("cancel", {})
        await session.result()
    assert not (workspace / "notes.txt").exists()
    assert [(m.to, m.call_id) for m in channel.messages] == [("oncall-1", item["call_id"])]


async def test_a_cancel_and_a_timeout_update_the_messages_too(env: WorkflowEnvironment, workspace: Path) -> None:
    """Given two sessions paused, when one is cancelled and the other times out, then each one's
    message says how it ended."""
    channel = RecordingChannel()
    async with agent_with(env, workspace, channel) as agent:
        cancelled = await agent.start("please delete notes.txt")
        await pending_items(cancelled)
        await eventually(lambda: asyncio.sleep(0, channel.messages), bool)
        await cancelled.signal("cancel", {})
        await cancelled.result()
        assert await updates(channel, 1) == [["cancelled by nobody"]]
        timed_out = await agent.start("please delete notes.txt", approval_timeout_seconds=1)
        await eventually(lambda: asyncio.sleep(0, channel.updates()), lambda seen: len(seen) == 2 and seen[1])
        await timed_out.signal("cancel", {})
        await timed_out.result()
    assert channel.updates() == [["cancelled by nobody"], ["timed_out by nobody"]]


async def test_a_channel_that_failed_half_way_shows_no_one_twice(env: WorkflowEnvironment, workspace: Path) -> None:
    """Given a channel that fails right after its first message, when a pause for two approvers is
    shown, then the retry shows it to the second alone, and both messages are updated once."""
    channel = RecordingChannel(fail_after_first_message=True)
    async with agent_with(env, workspace, channel) as agent:
        session = await agent.start("please delete notes.txt", approvers={"delete_file": ["ana", "bob"]})
        [item] = await pending_items(session)
        await eventually(lambda: asyncio.sleep(0, channel.messages), lambda seen: len(seen) == 2)
        await session.signal("reject", {"call_id": item["call_id"], "by": "bob", "reason": "no"})
        await updates(channel, 2)
        await session.signal("cancel", {})
        await session.result()
    assert channel.attempts == 2
    assert [m.to for m in channel.messages] == ["ana", "bob"]
    assert channel.updates() == [["rejected by bob"], ["rejected by bob"]]
