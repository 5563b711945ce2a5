"""The model activity: one chat-completions call, from whichever backend the worker chose."""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from typing import AsyncIterator, Protocol

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.conversation_cache import CACHE
from activities.model_context import carried_request, read_model_request
from activities.reply_bounds import bounded_reply
from activities.scripted_model import ScriptedModel, is_scripted
from activities.tools import CATALOG  # the catalog, with the built-in tools registered
from hitl.catalog.bounded_regexes import regex_time_limit
from hitl.settings import Settings
from workflows.contract import CALL_MODEL
from workflows.conversation import ModelReply
from workflows.planning import catalog_plans
from workflows.requests import ConversationRef, ModelRequest

HEARTBEAT_EVERY_SECONDS = 5
MODEL_ATTEMPTS = 6
MAX_FAILURE_MESSAGE_CHARS = 4_000  # a failure's message lands in history and in status.error


def final_on_attempt(error: Exception, attempts: int) -> Exception:
    """Failures of the call itself get `attempts` tries; then they are final.

    The workflow's retry policy has no attempt limit, so a worker that dies
    mid-call (a heartbeat timeout) is retried for as long as it takes; only
    what the model, a tool or a provider does wrong is counted here.
    """
    if activity.info().attempt < attempts:
        return error
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    if len(message) > MAX_FAILURE_MESSAGE_CHARS:
        message = message[:MAX_FAILURE_MESSAGE_CHARS] + " [...]"
    kind = getattr(error, "type", None) or type(error).__name__
    return ApplicationError(message, type=kind, non_retryable=True)


class ModelBackend(Protocol):
    description: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...


class ModelActivities:
    def __init__(self, backend: ModelBackend, client: Client | None = None) -> None:
        self.backend = backend
        self.client = client

    @activity.defn(name=CALL_MODEL.name)
    async def call_model(self, request: ConversationRef | ModelRequest) -> ModelReply:
        """Every exception of the call is counted: with no attempt limit in the
        workflow's policy, one that slipped past would be retried for ever and
        leave the session `running` with no error."""
        try:
            async with heartbeating():
                model_request, checked = await self.resolve(request)
                reply = bounded_reply(await self.backend.complete(model_request))
            with regex_time_limit():  # every call of the reply against its schema: one budget
                reply = with_catalog_plans(reply, model_request)
            if isinstance(request, ConversationRef):
                CACHE.remember(request, model_request, reply, checked)
            return reply
        except ApplicationError as error:
            if error.non_retryable:
                raise
            raise final_on_attempt(error, MODEL_ATTEMPTS) from None
        except Exception as error:  # noqa: BLE001 (a backend's own bug is a failure of the call too)
            failure = ApplicationError(f"{type(error).__name__}: {error}", type="ModelBadResponse")
            raise final_on_attempt(failure, MODEL_ATTEMPTS) from None


    async def resolve(self, request: ConversationRef | ModelRequest) -> tuple[ModelRequest, bool]:
        """Sessions pass a reference, read from what it carries (a run's first call, when small),
        from this worker's memory when it can vouch for it (activities/conversation_cache.py: True)
        and from the workflow otherwise; a whole request still comes from a call scheduled before
        references existed, when its activity task is retried."""
        if isinstance(request, ModelRequest):
            return request, False
        carried = carried_request(request)
        if carried is not None:
            return carried, False
        remembered = CACHE.request_for(request)
        if remembered is not None:
            return remembered, True
        if self.client is None:
            raise ApplicationError("this worker has no Temporal client to read conversations with", non_retryable=True)
        return await read_model_request(self.client, request), False


def with_catalog_plans(reply: ModelReply, request: ModelRequest) -> ModelReply:
    """The catalog's verdict on each call, recorded with the reply (see workflows/planning.py).

    Today's runs judge every call with a local activity and never take this (workflows/judging.py);
    runs older than verdicts by local activity still plan from it, and without it would plan
    live from whatever catalog replays them. Computed here, after the backend answered, so no
    backend can set it. It goes when VERDICTS_BY_LOCAL_ACTIVITY is retired (workflows/patches.py).
    """
    names = [tool["function"]["name"] for tool in request.tools]
    offered = {name: spec for name in names if (spec := CATALOG.get(name)) is not None}
    return reply.model_copy(update={"catalog_plans": catalog_plans(reply, offered)})


@asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while a slow call runs, so a dead worker is noticed in seconds
    rather than at the start-to-close timeout, and cancellation reaches us."""

    async def beat() -> None:
        while True:
            # The first beat after an interval, not at once: a call that ends sooner sends none
            # (each heartbeat is a request to the server and, on Temporal Cloud, an action; one
            # per model call and per tool was a sixth of the server requests of a busy worker).
            # The heartbeat timeout (10 s) still sees the first one in time.
            await asyncio.sleep(HEARTBEAT_EVERY_SECONDS)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def backend_from_env(settings: Settings) -> ModelBackend:
    """The scripted model when HITL_MODEL says `scripted:PATH` (a malformed script raises
    ScriptError), else OpenAI-compatible when OPENAI_API_KEY is set, else the offline stand-in."""
    if is_scripted(settings.model):
        return ScriptedModel.from_setting(settings.model)
    if settings.uses_openai:
        from activities.openai_backend import OpenAIBackend

        return OpenAIBackend(os.environ["OPENAI_API_KEY"], settings.openai_base_url, settings.model)
    from activities.offline_model import OfflineModel

    return OfflineModel()
