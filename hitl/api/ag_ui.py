"""`POST /ag-ui`: a session driven by any AG-UI client (docs/interface.md, "AG-UI").

The body is AG-UI's RunAgentInput; its `threadId` names the session. A run
does one thing, as the caller, under the same access table as every route:
it starts the session with the last user message (POST /sessions' own path),
or decides the pauses its `resume` entries answer (hitl/api/ag_ui_resume.py),
or sends the last user message as a new turn (POST .../messages' own path),
or, with none of those, reports where the session stands. It then follows the
session's event feed (hitl/api/events.py, with its access check before every
batch) as AG-UI events until the turn stops, and ends with RUN_FINISHED: an
interrupt outcome for every open pause, or success. A refusal is RUN_ERROR
with the one line the API would have answered, and its status as the code.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, cast

from ag_ui.core import (
    BaseEvent, RunAgentInput, RunErrorEvent, RunFinishedEvent, RunFinishedInterruptOutcome, RunStartedEvent, TextPart, UserMessage,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Body, Depends, Header, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from hitl.api.ag_ui_events import Translator, interrupt_of
from hitl.api.ag_ui_resume import decide_resumed
from hitl.api.auth import bearer_token, caller, identity
from hitl.api.oidc import Identity
from hitl.api.events import stream
from hitl.api.gateway import run_query, temporal, temporal_trouble
from hitl.api.guard import facts_of, granted
from hitl.api.sessions import SESSION_ID, Message, send_message, settle, start_session
from hitl.api.stream_access import NO_LONGER_READABLE, Reader
from hitl.client.events import SessionEvent, read_events
from workflows.contract import PENDING, STATUS
from workflows.forms import describe_validation_error

router = APIRouter(tags=["ag-ui"])

UNBUFFERED = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # each event as it comes, through a proxy too
Ending = dict[str, Any]  # `wait_until_settled`'s answer: status, pending, and the event it settled at


@router.post("/ag-ui")
async def run_agent(request: Request, body: dict[str, Any] = Body(...), person: str = Depends(caller),
                    who: Identity = Depends(identity),
                    authorization: str | None = Header(default=None)) -> StreamingResponse:
    """An AG-UI run on the session named by `threadId`, streamed as AG-UI server-sent events."""
    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as error:
        raise HTTPException(422, f"not an AG-UI RunAgentInput: {describe_validation_error(error)}") from None
    if not SESSION_ID.match(run.thread_id):
        raise HTTPException(422, "threadId is the session id: letters, digits and . _ : @ - only, at most 200, "
                                 "starting with a letter or digit")
    options = run.forwarded_props.get("session") if isinstance(run.forwarded_props, dict) else None
    if options is not None and not isinstance(options, dict):
        raise HTTPException(422, "forwardedProps.session, when given, is the workflow input to start the session with")
    encoder = EventEncoder(accept=request.headers.get("accept") or "text/event-stream")
    give_back = await request.app.state.streams.take(person)  # a run is a stream: 429 beyond the person's open streams
    events = run_events(request, run, Reader.of(who, bearer_token(authorization)), options or {})
    return StreamingResponse((encoder.encode(event) async for event in events), media_type=encoder.get_content_type(),
                             headers=UNBUFFERED, background=BackgroundTask(give_back))


async def run_events(request: Request, run: RunAgentInput, reader: Reader, options: dict[str, Any]) -> AsyncIterator[BaseEvent]:
    yield RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id)
    try:
        async for event in turn(request, run, reader, options):
            yield event
    except HTTPException as error:
        yield RunErrorEvent(message=" ".join(str(error.detail).split()), code=str(error.status_code))
    except (RPCError, RuntimeError) as error:  # as the API's routes answer it (503): the stream ends in one line
        if (trouble := temporal_trouble(error)) is None:
            raise
        yield RunErrorEvent(message=" ".join(trouble.split()), code="503")


async def turn(request: Request, run: RunAgentInput, reader: Reader, options: dict[str, Any]) -> AsyncIterator[BaseEvent]:
    session_id, person = run.thread_id, reader.person
    client = await temporal(request).get()
    handle = client.get_workflow_handle(session_id)
    text = last_user_text(run)
    if not await exists(handle):
        if run.resume:
            raise HTTPException(404, f"unknown session {session_id!r}: there is nothing to resume")
        if text is None:
            raise HTTPException(422, f"no session {session_id!r} yet: send a user message to start it")
        started = await start_session(request, {**options, "message": text, "session_id": session_id}, person)
        answer = started.model_dump(mode="json", exclude_unset=True)  # as the 201 carries it
        ending = finished({"status": answer["status"], "pending": answer["pending"]})
        async for event in followed(client, request, run, 0, reader, ending):
            yield event
        return
    before = int((await read_events(client, session_id, 0, 1) or {}).get("last") or 0)
    if run.resume:
        for note in await decide_resumed(request, session_id, person, run.resume):
            yield note
        if not await may_read(request, session_id, person):
            # A child's approver decides its call here but reads nothing else of the session.
            yield RunFinishedEvent(thread_id=session_id, run_id=run.run_id,
                                   result={"access_ended": True, "problem": NO_LONGER_READABLE})
            return
        ending = stopped_or_settled(request, session_id, before)
    elif text is not None:
        grant = await granted(request, session_id, person, "message")
        accepted = await send_message(session_id, Message.model_validate({"text": text}), request, grant)
        # Waiting for a person, the session keeps the message for later: this run ends with the pauses.
        ending = (stopped_or_settled(request, session_id, before) if accepted.get("state") == "awaiting_human"
                  else settle(request, session_id, int(accepted.get("event") or before)))
    else:
        await granted(request, session_id, person, "read")
        ending = stopped_or_settled(request, session_id, before)
    async for event in followed(client, request, run, before, reader, ending):
        yield event


async def may_read(request: Request, session_id: str, person: str) -> bool:
    try:
        await granted(request, session_id, person, "read")
    except HTTPException as refusal:
        if refusal.status_code == 404:
            return False
        raise
    return True


async def exists(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        await facts_of(handle)
    except HTTPException as error:
        if error.status_code == 404:
            return False
        raise
    return True


def last_user_text(run: RunAgentInput) -> str | None:
    """The last message's text when it is the user's: a run that resumes carries answers, so its
    messages (the conversation the client already sent) are not sent again."""
    if run.resume or not run.messages or not isinstance(run.messages[-1], UserMessage):
        return None
    content = run.messages[-1].content
    text = content if isinstance(content, str) else "\n".join(
        part.text for part in content if isinstance(part, TextPart))
    return text if text.strip() else None


async def finished(ending: Ending) -> Ending:
    return ending


async def stopped_or_settled(request: Request, session_id: str, before: int) -> Ending:
    """Where the session stands once what this run sent has taken effect: still waiting for a
    person (another pause of the step, or a decision that needs more approvals), or, once it
    runs again, where it stops next."""
    status = await run_query(request, session_id, STATUS)
    if status.get("state") == "running":
        return await settle(request, session_id, before)
    return {"status": status, "pending": await run_query(request, session_id, PENDING)}


async def nothing_to_give_back() -> None:
    """The run's stream slot is given back by the route (`background`), not by the stream."""


async def followed(client: Client, request: Request, run: RunAgentInput, before: int, reader: Reader,
                   ending: Awaitable[Ending]) -> AsyncIterator[BaseEvent]:
    """The session's events after `before` as AG-UI events, until the turn has stopped and every
    event up to that point is out; then RUN_FINISHED. The events come from the session's shared
    feed through the events route's own stream, so the reader's access is asked before each batch."""
    session_id = run.thread_id
    # The calls a resume answers were announced by the run that paused: the client has them.
    translate = Translator(session_id, opened={entry.interrupt_id for entry in run.resume or []})
    source = cast(AsyncGenerator[Any, None], stream(request, client, session_id, before, reader, nothing_to_give_back))
    end_task: asyncio.Task[Ending] = asyncio.ensure_future(ending)
    next_task: asyncio.Future[Any] | None = None
    seen, last = before, None
    try:
        while True:
            if end_task.done() and last is None:
                end = end_task.result()
                last = int(end.get("event") or 0) or int((await read_events(client, session_id, 0, 1)
                                                          or {}).get("last") or seen)
            if last is not None and seen >= last:
                break
            next_task = next_task or asyncio.ensure_future(source.__anext__())
            await asyncio.wait({next_task} if end_task.done() else {next_task, end_task},
                               return_when=asyncio.FIRST_COMPLETED)
            if not next_task.done():
                continue
            try:
                sent = next_task.result()
            except StopAsyncIteration:
                break
            next_task = None
            if sent.event == "end":
                ended = json.loads(sent.data)
                if ended.get("access_ended") and ended.get("problem") != NO_LONGER_READABLE:
                    raise HTTPException(401, str(ended.get("problem")))
                if ended.get("access_ended"):
                    # An approver reads a session only while a call waits for them: after their
                    # decision the run ends here, with nothing more of the session shown.
                    yield RunFinishedEvent(thread_id=session_id, run_id=run.run_id,
                                           result={"access_ended": True, "problem": NO_LONGER_READABLE})
                    return
                break  # the session is over: its ending says how
            event = SessionEvent.model_validate_json(sent.data)
            seen = max(seen, event.id)
            for agui in translate.events_for(event):
                yield agui
        end = await end_task
    finally:
        waiting = [task for task in (next_task, end_task) if task is not None]
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)  # a cancelled Update wait raises its own error
        await source.aclose()
    yield run_finished(run, end)


def run_finished(run: RunAgentInput, end: Ending) -> RunFinishedEvent:
    """Success when nothing waits; else an interrupt for each open pause (AG-UI's interrupts)."""
    status, pending = end.get("status") or {}, end.get("pending") or []
    result = {"state": status.get("state"), "answer": status.get("last_answer")}
    if not pending:
        return RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id, result=result)
    return RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id, result=result,
                            outcome=RunFinishedInterruptOutcome(interrupts=[interrupt_of(item) for item in pending]))
