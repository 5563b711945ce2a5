"""People decide in Slack: a pause reaches, as a card, the Slack users who may decide it; a click
there is a verified decision through the same rules as the API, named `via: slack` in the audit;
the card then says how it ended. Requests Slack did not sign, or signed long ago, or sent twice,
and clicks by people the operator does not know or the policy does not allow, decide nothing."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import deque
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from activities.slack import slack_messages
from hitl.api.slack import slack_door
from hitl.channels import channels_from_env
from hitl.worker import build_worker
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import Agent, eventually
from tests.support.slack_api import BOT_TOKEN, SIGNING_SECRET, SlackApi, click, signed, slack_api, submit_edit

PEOPLE = {"ana": {"slack": "U0ANA"}, "bob": {"slack": "U0BOB"}, "carol": {"slack": "U0CAROL"}}
STRANGER = "U0EVE"  # in the Slack workspace, not in HITL_CHANNELS' people
INTERACTIONS = "/channels/slack/interactions"
SHARED_CHANNEL = "C0APPROVALS"  # everyone in the workspace reads it


@dataclass
class SlackWorld:
    api: Api
    slack: SlackApi

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        async with self.api.as_(None) as http:
            return await http.post(INTERACTIONS, content=body, headers=headers)

    async def click(self, user: str, message: dict[str, Any], action: str) -> httpx.Response:
        return await self.post(*signed(click(user, message, action)))

    async def card_for(self, person: str, count: int = 1) -> dict[str, Any]:
        """The card posted to `person`'s direct messages, as Slack delivered it (channel and ts)."""
        user = PEOPLE[person]["slack"]
        posted = await eventually(lambda: asyncio.sleep(0, self.slack.answered("chat.postMessage")),
                                  lambda calls: sum(call.arguments["channel"] == user for call in calls) >= count)
        [call] = [call for call in posted if call.arguments["channel"] == user][-1:]
        assert call.answer is not None
        return {**call.arguments, "channel": call.answer["channel"], "ts": call.answer["ts"]}

    async def audit(self, session: str, person: str = "bob") -> list[dict[str, Any]]:
        async with self.api.as_(person) as http:
            return (await http.get(f"/sessions/{session}/audit")).json()


@asynccontextmanager
async def slack_world(env: WorkflowEnvironment, workspace: Path, tmp_path: Path,
                      **slack_options: Any) -> AsyncIterator[SlackWorld]:
    """A worker and an API reading one HITL_CHANNELS with Slack at a loopback Web API."""
    with slack_api() as slack:
        path = tmp_path / "channels.json"
        path.write_text(json.dumps({"people": PEOPLE, "slack": {
            "bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET",
            "channel": SHARED_CHANNEL, "api_url": slack.base_url, **slack_options}}))
        environ = {"HITL_CHANNELS": str(path), "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
        channels = channels_from_env(environ)
        queue = f"slack-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, queue, OfflineModel(), workspace,
                                message_channels=slack_messages(channels, environ)):
            async with serving(Agent(env.client, queue, workspace), slack_door=slack_door(channels, environ)) as api:
                yield SlackWorld(api, slack)


async def paused_for_ana(world: SlackWorld) -> tuple[str, str]:
    started = await world.api.start("bob", "please delete notes.txt", approvers={"delete_file": ["ana"]})
    return started["session_id"], started["pending"][0]["call_id"]


async def tool_runs(world: SlackWorld, session: str) -> int:
    history = await world.api.agent.client.get_workflow_handle(session).fetch_history()
    return sum(event.activity_task_scheduled_event_attributes.activity_type.name == "run_tool"
               for event in history.events if event.HasField("activity_task_scheduled_event_attributes"))


async def test_ana_approves_from_slack_and_her_card_says_so(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given a pause that ana must decide, when she clicks Approve on the card Slack showed her,
    then the tool runs once, the audit says approved by ana via slack, and her card says so."""
    async with slack_world(env, workspace, tmp_path) as world:
        session, call = await paused_for_ana(world)
        card = await world.card_for("ana")
        shown = json.dumps(card["blocks"])
        for seen in ("delete_file", "notes.txt", "bob", "please delete notes.txt", call):
            assert seen in shown, seen
        assert [b["action_id"] for b in card["blocks"][-1]["elements"]] == ["approve", "edit", "reject"]
        assert card["channel"] == "D0ANA"  # her direct messages with the bot

        answer = await world.click("U0ANA", card, "approve")
        assert answer.status_code == 200, answer.text
        [update] = await eventually(lambda: asyncio.sleep(0, world.slack.answered("chat.update")), bool)
        assert (update.arguments["channel"], update.arguments["ts"]) == (card["channel"], card["ts"])
        assert "approved by ana via slack" in update.arguments["text"]
        audit = await world.audit(session)
        assert [(e["by"], e["via"]) for e in audit if e["event"] == "approved"] == [("ana", "slack")]
        assert not (workspace / "notes.txt").exists()
        assert await tool_runs(world, session) == 1
        assert len(world.slack.answered("chat.postMessage")) == 1  # shown to ana alone, once
        assert {call.token for call in world.slack.calls} == {f"Bearer {BOT_TOKEN}"}


async def test_requests_slack_did_not_send_and_people_who_may_not_decide_change_nothing(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given ana's card, then: a wrong signature, a stale timestamp and a replayed request are
    refused (401); a stranger's click and bob's (not an approver) decide nothing, and each is
    told why privately; the pause still waits for ana."""
    async with slack_world(env, workspace, tmp_path) as world:
        session, call = await paused_for_ana(world)
        card = await world.card_for("ana")
        payload = click("U0ANA", card, "reject")

        body, headers = signed(payload, secret="not-the-apps-secret")
        wrong = await world.post(body, headers)
        assert (wrong.status_code, wrong.json()["detail"]) == (401, "the request's X-Slack-Signature does not verify")
        stale = await world.post(*signed(payload, at=time.time() - 6 * 60))
        assert stale.status_code == 401 and "five minutes" in stale.json()["detail"]

        stranger = await world.click(STRANGER, card, "approve")
        assert stranger.status_code == 200
        bob = await world.click("U0BOB", card, "approve")
        assert bob.status_code == 200
        notes = await eventually(lambda: asyncio.sleep(0, world.slack.answered("chat.postEphemeral")),
                                 lambda calls: len(calls) == 2)
        assert [n.arguments["user"] for n in notes] == [STRANGER, "U0BOB"]
        assert "not known" in notes[0].arguments["text"]
        assert notes[1].arguments["text"].startswith("You may not decide this call: ") and "ana" in notes[1].arguments["text"]

        once = signed(payload)
        assert (await world.post(*once)).status_code == 200  # ana's reject, taken
        replayed = await world.post(*once)
        assert (replayed.status_code, replayed.json()["detail"]) == (401, "this request was already taken once")
        audit = await eventually(lambda: world.audit(session),
                                 lambda trail: any(e["event"] == "rejected" for e in trail))
        assert [(e["by"], e["via"]) for e in audit if e["event"] in ("approved", "rejected")] == [("ana", "slack")]
        assert (workspace / "notes.txt").exists()
        assert await tool_runs(world, session) == 0


async def test_a_timestamp_that_is_no_time_is_refused_in_one_line(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Anyone may post to the interactivity URL: a timestamp of five thousand digits (more than
    Python reads as a number) is refused with the reason (401), never answered with a 500."""
    async with slack_world(env, workspace, tmp_path) as world:
        body, headers = signed({"type": "block_actions", "user": {"id": "U0ANA"}})
        answer = await world.post(body, {**headers, "X-Slack-Request-Timestamp": "9" * 5_000})
        assert (answer.status_code, answer.json()["detail"]) == (401, "no X-Slack-Request-Timestamp")


async def test_ana_edits_the_arguments_in_a_modal_that_refuses_what_the_tool_would(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given ana's card, when she clicks Edit, then a modal opens with the arguments; arguments
    that are not JSON or that the tool refuses are shown as errors in it; fixed ones approve."""
    (workspace / "old.txt").write_text("old\n")
    async with slack_world(env, workspace, tmp_path) as world:
        session, call = await paused_for_ana(world)
        card = await world.card_for("ana")
        assert (await world.click("U0ANA", card, "edit")).status_code == 200
        [opened] = await eventually(lambda: asyncio.sleep(0, world.slack.answered("views.open")), bool)
        view = opened.arguments["view"]
        assert json.loads(view["blocks"][0]["element"]["initial_value"]) == {"path": "notes.txt"}

        for typed, why in (("{not json", "not JSON"), ('{"path": 7}', "edited args do not fit delete_file")):
            refused = await world.post(*signed(submit_edit("U0ANA", view, typed)))
            assert refused.json()["response_action"] == "errors"
            assert why in refused.json()["errors"]["hitl_args"], refused.json()
        accepted = await world.post(*signed(submit_edit("U0ANA", view, '{"path": "old.txt"}')))
        assert (accepted.status_code, accepted.content) == (200, b"")
        [update] = await eventually(lambda: asyncio.sleep(0, world.slack.answered("chat.update")), bool)
        assert "approved with edited arguments by ana via slack" in update.arguments["text"]
        audit = await world.audit(session)
        assert [(e["by"], e["via"]) for e in audit if e["event"] == "edited"] == [("ana", "slack")]
        assert (workspace / "notes.txt").exists() and not (workspace / "old.txt").exists()


async def test_a_slack_answering_429_then_500_is_one_line_each_and_one_card(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str, caplog: pytest.LogCaptureFixture) -> None:
    """Given Slack rate-limiting the first post and failing the second, when a pause opens, then
    the worker logs one line for each and Temporal retries, and ana gets one card, not three."""
    caplog.set_level(logging.WARNING, logger="hitl.slack")
    async with slack_world(env, workspace, tmp_path) as world:
        world.slack.fail_next["chat.postMessage"] = deque([429, 500])
        await paused_for_ana(world)
        await world.card_for("ana")
    lines = [record.getMessage() for record in caplog.records if record.name == "hitl.slack"]
    assert len(lines) == 2, lines
    assert "chat.postMessage answered 429 (ratelimited)" in lines[0] and "in 1s, as Slack asked" in lines[0]
    assert "chat.postMessage answered 500" in lines[1] and "with backoff" in lines[1]
    assert [call.status for call in world.slack.calls if call.method == "chat.postMessage"] == [429, 500, 200]


async def bob_and_ana_are_asked(world: SlackWorld) -> tuple[str, str]:
    """bob's session, ana a participant, paused on the agent's question (ask_user_question):
    its deciders are the session's own people, none named."""
    started = await world.api.start("bob", "book me a flight to Beijing", participants=["ana"])
    [item] = started["pending"]
    assert item["kind"] == "question", item
    return started["session_id"], item["call_id"]


def posted_to(world: SlackWorld, channel: str) -> list[Any]:
    return [call for call in world.slack.answered("chat.postMessage") if call.arguments["channel"] == channel]


async def test_a_question_reaches_the_session_people_directly_never_a_shared_channel(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given a shared channel the operator did not opt in, when bob's session asks a question
    that bob and ana (a participant) may answer, then the channel is shown nothing, each of them
    gets the card in their direct messages, and carol (who may not see the session) gets nothing;
    once bob answers, both cards say so."""
    async with slack_world(env, workspace, tmp_path) as world:
        session, call = await bob_and_ana_are_asked(world)
        cards = {person: await world.card_for(person) for person in ("bob", "ana")}
        assert {card["channel"] for card in cards.values()} == {"D0BOB", "D0ANA"}
        assert "Which city are you departing from?" in json.dumps(cards["ana"]["blocks"])
        async with world.api.as_("bob") as http:
            answered = await http.post(f"/sessions/{session}/calls/{call}/answer", json={"answer": "Paris"})
        assert answered.status_code == 200, answered.text
        updates = await eventually(lambda: asyncio.sleep(0, world.slack.answered("chat.update")),
                                   lambda calls: len(calls) >= 2)
        assert {(u.arguments["channel"], u.arguments["ts"]) for u in updates} == \
            {(card["channel"], card["ts"]) for card in cards.values()}
        assert posted_to(world, SHARED_CHANNEL) == [] and posted_to(world, "U0CAROL") == []


async def test_a_shared_channel_the_operator_opted_in_gets_the_card_instead(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given the channels file saying the shared channel may see every session, when bob's
    session asks its question, then the card goes to the channel, and to nobody directly."""
    async with slack_world(env, workspace, tmp_path, channel_may_see_every_session=True) as world:
        await bob_and_ana_are_asked(world)
        [shown] = await eventually(lambda: asyncio.sleep(0, posted_to(world, SHARED_CHANNEL)), bool)
        assert "Which city are you departing from?" in json.dumps(shown.arguments["blocks"])
        assert len(world.slack.answered("chat.postMessage")) == 1


async def test_a_channel_member_who_may_not_decide_is_told_so_in_words_and_decides_nothing(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given an opted-in shared channel showing bob's pause (his own people decide it), when
    carol, whom `people` maps but who is none of the session's people, clicks Approve, then she
    is told privately that she may not decide this call and why, not "unknown session", and the
    call still waits."""
    async with slack_world(env, workspace, tmp_path, channel_may_see_every_session=True) as world:
        started = await world.api.start("bob", "please delete notes.txt")
        session = started["session_id"]
        [shown] = await eventually(lambda: asyncio.sleep(0, posted_to(world, SHARED_CHANNEL)), bool)
        card = {**shown.arguments, "channel": shown.answer["channel"], "ts": shown.answer["ts"]}
        assert (await world.click("U0CAROL", card, "approve")).status_code == 200
        [note] = await eventually(lambda: asyncio.sleep(0, world.slack.answered("chat.postEphemeral")), bool)
        assert note.arguments["user"] == "U0CAROL" and note.arguments["channel"] == SHARED_CHANNEL
        text = note.arguments["text"]
        assert text.startswith("You may not decide this call: ") and "owner, participants" in text, text
        assert "unknown session" not in text
        async with world.api.as_("bob") as http:
            assert [item["call_id"] for item in (await http.get(f"/sessions/{session}/pending")).json()] == \
                [started["pending"][0]["call_id"]]
        assert not any(e["event"] in ("approved", "rejected") for e in await world.audit(session))
        assert (workspace / "notes.txt").exists()


def approve_button(card: dict[str, Any]) -> dict[str, Any]:
    [actions] = [block for block in card["blocks"] if block["type"] == "actions"]
    [approve] = [element for element in actions["elements"] if element["action_id"] == "approve"]
    return approve


async def test_a_destructive_call_asks_to_confirm_before_slack_approves_it_and_an_ordinary_one_does_not(
        env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str) -> None:
    """Given two pauses for ana, a destructive `delete_file` and an ordinary `send_email`, then the
    first card's Approve carries Slack's confirmation dialog (Block Kit `confirm`: a title, a text
    naming the tool and that it cannot be undone, confirm and deny, within Slack's lengths) and the
    second's does not; the confirmed click is the same signed request and approves."""
    async with slack_world(env, workspace, tmp_path) as world:
        session, _ = await paused_for_ana(world)
        destructive = await world.card_for("ana")
        await world.api.start("bob", "send an email to carol@example.com about lunch saying see you at noon",
                              approvers={"send_email": ["ana"]})
        ordinary = await world.card_for("ana", count=2)
        assert "send_email" in json.dumps(ordinary["blocks"])

        asked = approve_button(destructive).get("confirm")
        assert asked is not None, approve_button(destructive)
        assert set(asked) >= {"title", "text", "confirm", "deny"}
        for part, longest in (("title", 100), ("text", 300), ("confirm", 30), ("deny", 30)):
            assert asked[part]["type"] == "plain_text" and 0 < len(asked[part]["text"]) <= longest, (part, asked[part])
        assert "delete_file" in asked["text"]["text"] and "cannot be undone" in asked["text"]["text"]
        assert "confirm" not in approve_button(ordinary)

        answer = await world.click("U0ANA", destructive, "approve")
        assert answer.status_code == 200, answer.text
        audit = await eventually(lambda: world.audit(session), lambda trail: any(e["event"] == "approved" for e in trail))
        assert [(e["by"], e["via"]) for e in audit if e["event"] == "approved"] == [("ana", "slack")]
        assert not (workspace / "notes.txt").exists()
