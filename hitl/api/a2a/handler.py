"""A2A's JSON-RPC methods on sessions: every one goes through the API's own paths.

A new task starts a session as POST /sessions does (`start_session`), a text
message is the session's next message (`send_message`), a data part naming a
call decides it through `decide()` once `allowed_on_call` granted it, and
tasks/get and tasks/cancel are the status, pending and cancel routes. Nothing
here re-states who may do what: the route functions and their guards do.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncGenerator, AsyncIterator

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, Message, SendMessageRequest,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    InvalidParamsError, PushNotificationNotSupportedError, TaskNotFoundError, UnsupportedOperationError,
)
from fastapi import Request
from pydantic import ValidationError

from hitl.api import calls, sessions
from hitl.api.a2a.decisions import decision_of
from hitl.api.a2a.refusals import as_a2a_errors
from hitl.api.a2a.tasks import data_of, decision_task, task_of
from hitl.api.guard import Grant, allowed, allowed_on_call
from workflows.forms import describe_validation_error

NO_PUSH = "push notifications are not offered: poll tasks/get, or follow GET /sessions/{id}/events"


class SessionsAsTasks(RequestHandler):
    """The request handler behind POST /a2a; `context.state` holds the request and its caller."""

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        request, person = context.state["request"], context.state["person"]
        message = params.message
        texts = [part.text for part in message.parts if part.HasField("text")]
        data = [data_of(part) for part in message.parts if part.HasField("data")]
        if len(data) + len(texts) < len(message.parts):
            raise InvalidParamsError("only text and data parts are read: send the file's content as text")
        session_id = message.task_id or message.context_id
        if not session_id:
            return await self.start(request, person, "\n".join(texts), data)
        if data:
            if texts or len(data) > 1:
                raise InvalidParamsError('a decision is one data part {"call_id", "decision", ...} and no text')
            return await self.decide(request, person, session_id, data[0])
        if not texts:
            raise InvalidParamsError("send text (a message to the session) or a data part (a decision)")
        return await self.tell(request, person, session_id, "\n".join(texts))

    async def start(self, request: Request, person: str, text: str, data: list[Any]) -> Task:
        """A new session, as POST /sessions with the message's data part as its body."""
        if len(data) > 1 or (data and not isinstance(data[0], dict)):
            raise InvalidParamsError("a new task's data part is one object: the POST /sessions body")
        body = {**(data[0] if data else {}), **({"message": text} if text else {})}
        with as_a2a_errors():
            started = await sessions.start_session(request, body, person)
        answer = started.model_dump(mode="json", exclude_unset=True)  # as the 201 carries it
        return task_of(answer["session_id"], answer["status"], answer["pending"])

    async def tell(self, request: Request, person: str, session_id: str, text: str) -> Task:
        async with granted(request, person, session_id, "message") as grant:
            with as_a2a_errors():
                body = sessions.Message(text=text, wait=True, by=None)
                sent = await sessions.send_message(session_id, body, request, grant)
            return task_of(session_id, sent["status"], sent["pending"])

    async def decide(self, request: Request, person: str, session_id: str, data: Any) -> Task:
        decision = decision_of(data)
        reads = await may_read(request, person, session_id)
        # Whoever may not read the task may still decide a call of its children that is theirs to
        # decide (allowed_on_call); for anyone else the task is unknown, as it is to every read.
        with as_a2a_errors(session_level=not reads):
            grant = await allowed_on_call(decision.verb)(request, session_id, decision.call_id, person)
            decided = await calls.decide(request, session_id, decision.call_id, decision.verb, grant,
                                         decision.fields, via="a2a")
            if not reads:
                return decision_task(session_id, decided)
            settled = await sessions.settle(request, session_id, decided.get("event", 0))
        return task_of(session_id, settled["status"], settled["pending"])

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        request = context.state["request"]
        async with granted(request, context.state["person"], params.id, "read") as grant:
            with as_a2a_errors():
                status = await sessions.status(params.id, request, grant)
                pending = await sessions.pending(params.id, request, grant)
        return task_of(params.id, status, pending)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        request = context.state["request"]
        given = {"reason": params.metadata["reason"]} if "reason" in params.metadata else {}
        try:
            body = sessions.CancelBody.model_validate(given)
        except ValidationError as error:
            raise InvalidParamsError(f"metadata.reason: {describe_validation_error(error)}") from None
        async with granted(request, context.state["person"], params.id, "cancel") as grant:
            with as_a2a_errors():
                await sessions.cancel(params.id, request, body, grant)
        async with granted(request, context.state["person"], params.id, "read") as grant:
            with as_a2a_errors():
                status = await sessions.status(params.id, request, grant)
        return task_of(params.id, status, [], cancelled=True)

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any, None]:
        raise UnsupportedOperationError("streaming is not offered: use SendMessage, which answers once the "
                                        "session pauses or answers")
        yield

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Any, None]:
        raise UnsupportedOperationError("subscribing is not offered: poll GetTask, or follow GET /sessions/{id}/events")
        yield

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        raise UnsupportedOperationError("listing tasks is not offered: GET /inbox lists what waits for you")

    async def on_create_task_push_notification_config(self, params: TaskPushNotificationConfig,
                                                      context: ServerCallContext) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(NO_PUSH)

    async def on_get_task_push_notification_config(self, params: GetTaskPushNotificationConfigRequest,
                                                   context: ServerCallContext) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(NO_PUSH)

    async def on_list_task_push_notification_configs(
            self, params: ListTaskPushNotificationConfigsRequest,
            context: ServerCallContext) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError(NO_PUSH)

    async def on_delete_task_push_notification_config(self, params: DeleteTaskPushNotificationConfigRequest,
                                                      context: ServerCallContext) -> None:
        raise PushNotificationNotSupportedError(NO_PUSH)

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        raise UnsupportedOperationError("there is no extended agent card: the public one says everything")


async def may_read(request: Request, person: str, session_id: str) -> bool:
    """Whether the caller may read the session (an unknown one: no)."""
    try:
        async with granted(request, person, session_id, "read"):
            return True
    except TaskNotFoundError:
        return False


@asynccontextmanager
async def granted(request: Request, person: str, session_id: str, action: Any) -> AsyncIterator[Grant]:
    """The access table's grant for `action` on the session (hitl/api/guard.py's `allowed`, the
    dependency every session route uses); its refusals as A2A errors, a 404 as an unknown task."""
    with as_a2a_errors(session_level=True):
        async with asynccontextmanager(allowed(action))(request, session_id, person) as grant:
            yield grant
