"""Another agent drives sessions through A2A with the official a2a-sdk client: a session is a task,
a pause is `input-required` with its card, a decision is a data part on the task."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.helpers.proto_helpers import get_data_parts, new_text_part
from a2a.types.a2a_pb2 import CancelTaskRequest, TaskState
from a2a.utils.errors import TaskNotFoundError

from tests.support.a2a_client import a2a_as
from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually

INPUT_REQUIRED, COMPLETED = TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_COMPLETED


def card_of(task) -> dict:  # type: ignore[no-untyped-def]
    [card] = get_data_parts(task.status.message.parts)
    return card


async def test_the_card_resolver_reads_the_agent_card(api: Api) -> None:
    async with httpx.AsyncClient() as http:  # the card is public, as A2A expects
        card = await A2ACardResolver(http, api.base).get_agent_card()
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding) == (f"{api.base}/a2a", "JSONRPC")
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert "bearer" in card.security_requirements[0].schemes


async def test_text_on_the_task_is_the_sessions_next_message_and_cancel_closes_it(api: Api) -> None:
    async with a2a_as(api, "ana") as ana, a2a_as(api, "carol") as carol:
        task = await ana.start("hello there")
        assert task.status.state == COMPLETED
        assert "offline stand-in" in task.artifacts[0].parts[0].text
        paused = await ana.send(new_text_part("please delete notes.txt"), task_id=task.id)
        assert paused.status.state == INPUT_REQUIRED and card_of(paused)["tool"] == "delete_file"
        with pytest.raises(TaskNotFoundError):  # not carol's to see, let alone cancel
            await carol.client.cancel_task(CancelTaskRequest(id=task.id))
        cancelled = await ana.client.cancel_task(CancelTaskRequest(id=task.id, metadata={"reason": "changed my mind"}))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        closed = await eventually(lambda: ana.get(task.id), lambda t: t.status.state == TaskState.TASK_STATE_CANCELED)
    assert "changed my mind (by ana)" in closed.status.message.parts[0].text
    assert (api.agent.workspace / "notes.txt").exists()


async def test_without_a_token_nothing_is_started(api: Api) -> None:
    async with a2a_as(api, None) as nobody:
        with pytest.raises(A2AClientError, match="HTTP Error 401"):
            await nobody.start("please delete notes.txt")
