"""The official A2A client (a2a-sdk) as a person: the agent card resolved from the API, then
JSON-RPC with that person's bearer token."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task

from tests.support.api_server import Api, token_of


class Agent2Agent:
    """One person's A2A client of the API."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def send(self, *parts: Part, task_id: str = "") -> Task:
        """SendMessage; the task it answers with."""
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=list(parts))
        [answer] = [response async for response in self.client.send_message(SendMessageRequest(message=message))]
        assert answer.HasField("task"), answer
        return answer.task

    async def start(self, text: str, **options: Any) -> Task:
        return await self.send(new_text_part(text), *([new_data_part(options)] if options else []))

    async def decide(self, task: Task, **decision: Any) -> Task:
        return await self.send(new_data_part(decision), task_id=task.id)

    async def get(self, task_id: str) -> Task:
        return await self.client.get_task(GetTaskRequest(id=task_id))


@asynccontextmanager
async def a2a_as(api: Api, person: str | None) -> AsyncIterator[Agent2Agent]:
    """The client the card resolver's card makes (a bearer token for `person`, None: none)."""
    headers = {"Authorization": f"Bearer {token_of(person)}"} if person else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, api.base).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        yield Agent2Agent(client)
