"""The world bench/doors.py decides in: one worker, its channels and MCP server, and the API.

A loopback Slack Web API (tests/support/slack_api.py) and a loopback SMTP server
(tests/support/mail_server.py) are HITL_CHANNELS' `slack` and `email`, so every
pause is a Slack card and a mail to ana with its `/decide/<token>` links, whichever
door decides it. tests/support/asking_mcp.py (the MCP SDK's server) is the MCP
server `diner`, whose `book_table` asks a person in form mode (input_required).
The model is the offline one, which also delegates when told to
(tests/integration/test_sub_agents.py) and books a table when asked.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from temporalio.client import Client

from activities.mail import mail_messages
from activities.mcp import McpToolbox, parse_config
from activities.offline_model import read_turn, single_tool
from activities.slack import slack_messages
from hitl.api.slack import slack_door
from hitl.channels import channels_from_env
from hitl.decision_keys import worker_email_link_key
from hitl.devserver import free_port
from hitl.startup import quiet_expected_failures
from hitl.worker import build_worker
from tests.integration.test_sub_agents import DelegatingModel
from tests.support.a2a_client import Agent2Agent, a2a_as
from tests.support.api_server import Api, serving
from tests.support.mail_server import Inbox, mail_server
from tests.support.mcp_servers import asking_server
from tests.support.sessions import Agent
from tests.support.slack_api import BOT_TOKEN, SIGNING_SECRET, SlackApi, slack_api
from workflows.conversation import ModelReply
from workflows.requests import ModelRequest

PERSON, SLACK_USER, MAIL = "ana", "U0ANA", "ana@example.com"
BOOKING = "book a table for friday"
BOOK_TABLE = "mcp__diner__book_table"


class DoorsModel(DelegatingModel):
    """The offline model, which also delegates when told to and calls the diner's book_table when
    asked to book a table."""

    async def complete(self, request: ModelRequest) -> ModelReply:
        turn = read_turn(request.messages)
        if turn is None or turn.request != BOOKING:
            return await super().complete(request)
        tools = {tool["function"]["name"] for tool in request.tools}
        return single_tool(turn, tools, BOOK_TABLE, {"day": "friday"})


@dataclass
class World:
    api: Api
    slack: SlackApi
    inbox: Inbox
    client: Client
    workspace: Path
    a2a: Agent2Agent


@contextmanager
def environment(**variables: str) -> Iterator[None]:
    """The worker and the API read their keys and channels from the environment."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


async def world(client: Client, folder: Path, stack: AsyncExitStack) -> World:
    slack, inbox, api_port = stack.enter_context(slack_api()), stack.enter_context(mail_server()), free_port()
    channels_file = folder / "channels.json"
    channels_file.write_text(json.dumps({
        "public_url": f"http://127.0.0.1:{api_port}", "people": {PERSON: {"slack": SLACK_USER, "email": MAIL}},
        "slack": {"bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET",
                  "channel": "C0APPROVALS", "api_url": slack.base_url},
        "email": {"smtp_url": inbox.url, "from": "agent@example.com"}}))
    environ = {"HITL_CHANNELS": str(channels_file), "SLACK_BOT_TOKEN": BOT_TOKEN,
               "SLACK_SIGNING_SECRET": SIGNING_SECRET, "HITL_KEYS_DIR": str(folder / "keys"),
               "HITL_SIGNING_KEY": "bench:" + base64.b64encode(os.urandom(32)).decode()}
    stack.enter_context(environment(**environ))
    quiet_expected_failures()  # as the worker's own: a server's question is a run that failed on purpose
    channels = channels_from_env(dict(os.environ))
    messages = slack_messages(channels, dict(os.environ)) + mail_messages(channels, dict(os.environ), worker_email_link_key)
    (folder / "diner").mkdir()
    await stack.enter_async_context(McpToolbox(parse_config({"mcpServers": {"diner": asking_server(folder / "diner")}})))
    queue, workspace = f"doors-{uuid.uuid4().hex[:8]}", folder / "workspace"
    await stack.enter_async_context(build_worker(client, queue, DoorsModel(), workspace, message_channels=messages))
    api = await stack.enter_async_context(serving(Agent(client, queue, workspace), port=api_port,
                                                  slack_door=slack_door(channels, dict(os.environ))))
    a2a = await stack.enter_async_context(a2a_as(api, PERSON))
    return World(api, slack, inbox, client, workspace, a2a)
