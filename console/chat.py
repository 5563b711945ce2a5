"""The interactive chat: type messages, decide approvals, answer questions.

It holds no state of its own: everything comes from the session's queries, so
quitting and starting again reattaches to the same session where it paused.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from console.events import PAGE, EventsUnavailable, SessionEvent, read_events
from console.progress import Activity, WorkingIndicator
from console.render import call_text, render_message, say, shown
from console.updates import execute_update_retrying
from workflows.agent import AgentWorkflow

POLL_SECONDS = 0.2


async def ask(prompt: str) -> str:
    """input() on a daemon thread, so Ctrl-C never waits for a line to be typed."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            text = input(shown(prompt))  # a prompt may quote the model (argument names and values)
        except BaseException as error:  # EOFError on Ctrl-D, anything else as it came
            loop.call_soon_threadsafe(_settle, line, None, error)
        else:
            loop.call_soon_threadsafe(_settle, line, text, None)

    threading.Thread(target=read, daemon=True).start()
    return (await line).strip()


def _settle(line: asyncio.Future[str], text: str | None, error: BaseException | None) -> None:
    if line.done():
        return
    if error is not None:
        line.set_exception(EOFError() if isinstance(error, EOFError) else error)
    else:
        line.set_result(text or "")


class Chat:
    def __init__(self, client: Client, task_queue: str, session_id: str, by: str) -> None:
        self.client = client
        self.task_queue = task_queue
        self.session_id = session_id
        self.by = by
        self.shown = 0
        self.echo_user = True  # show the history once when reattaching; after that you typed it
        self.indicator = WorkingIndicator()
        self.activity = Activity()
        self.events_seen = 0  # the spinner line's tool comes from the session's events

    async def run(self) -> int:
        say(f"(session {self.session_id}; Ctrl-C or Ctrl-D leaves it where it is, /cancel ends it)")
        try:
            handle = await self.attach()
            while True:
                status = await self.settle(handle)
                if status["state"] == "closed":
                    say(f"(session closed: {status.get('closed_reason')})")
                    return 0
                pending = await handle.query("pending")
                mine = [item for item in pending if self.by not in item.get("approvals", [])]
                if mine:
                    await self.decide(handle, mine[0])
                    continue
                if pending:
                    await self.wait_for_others(handle, pending)
                    continue
                text = await ask("You: ")
                if text in ("/quit", "/exit"):
                    return 0
                if text == "/cancel":
                    await self.update(handle, "cancel_update", {"reason": "cancelled from the chat"})
                elif text:
                    await self.update(handle, "user_message_update", {"text": text, "by": self.by})
        except (EOFError, KeyboardInterrupt):
            self.leave()
            return 0
        except asyncio.CancelledError:
            self.leave()
            raise

    def leave(self) -> None:
        say(f"\n(left session {self.session_id}; it keeps its place: run the same command to reattach)")

    async def attach(self) -> WorkflowHandle[Any, Any]:
        handle = self.client.get_workflow_handle(self.session_id)
        try:
            description = await handle.describe()
            if description.status is not None and description.status.name == "RUNNING":
                say(f"(reattached to session {self.session_id})")
                return handle
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
        first = ""
        while not first:
            first = await ask("You: ")
        self.echo_user = False
        return await self.client.start_workflow(
            AgentWorkflow.run, {"message": first, "by": self.by}, id=self.session_id, task_queue=self.task_queue
        )

    async def settle(self, handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
        """Show the conversation as it grows until the session waits for someone,
        with a spinner line (on a terminal) while the agent works."""
        try:
            while True:
                status = await handle.query("status")
                await self.show_new_messages(handle)
                if status["state"] != "running" and not status["queued_messages"]:
                    self.indicator.stop()
                    if status.get("error"):
                        say(f"(error: {status['error']})")
                    return status
                await self.show_progress(handle, status)
                await asyncio.sleep(POLL_SECONDS)
        finally:
            self.indicator.stop()

    async def show_progress(self, handle: WorkflowHandle[Any, Any], status: dict[str, Any]) -> None:
        """The step from `status`, the tool from the session's events (the stream `watch` and the API share)."""
        if not self.indicator.enabled:
            return
        self.activity.read_status(status)
        for event in await self.new_events(handle):
            self.activity.read_event(event)
        self.activity.state = "running"  # a queued message is work too, whatever the last event said
        self.indicator.show(self.activity)

    async def new_events(self, handle: WorkflowHandle[Any, Any]) -> list[SessionEvent]:
        try:
            answer = await read_events(handle, self.events_seen, PAGE)
        except EventsUnavailable:
            return []  # a worker without the `events` query: the line shows the step alone
        if answer is None:
            return []
        events = [SessionEvent.model_validate(event) for event in answer["events"]]
        if events:
            self.events_seen = events[-1].id
        return events

    async def wait_for_others(self, handle: WorkflowHandle[Any, Any], pending: list[dict[str, Any]]) -> None:
        say(f"(you approved; waiting for other approvers of {pending[0]['tool']})")
        while await handle.query("pending") == pending:
            await asyncio.sleep(POLL_SECONDS * 5)

    async def show_new_messages(self, handle: WorkflowHandle[Any, Any]) -> None:
        transcript = await handle.query("transcript")
        for message in transcript[self.shown :]:
            if message["role"] == "user" and not self.echo_user:
                continue
            for line in render_message(message):
                say(line)
        self.shown = len(transcript)
        self.echo_user = False

    async def decide(self, handle: WorkflowHandle[Any, Any], item: dict[str, Any]) -> None:
        if item["kind"] == "question":
            answer = await self.answer_for(item)
            if answer is not None:
                await self.update(handle, "answer_update", {"call_id": item["call_id"], "answer": answer, "by": self.by})
            return
        if item["kind"] == "review":
            say(f"⚠ {call_text(item['tool'], item['args'])} ran; review its result before the agent sees it:")
            say("\n".join(f"    {line}" for line in (item.get("result") or "").splitlines()))
            say("  [a]pprove / [e]dit / [r]eject")
        else:
            say(f"⚠ {call_text(item['tool'], item['args'])} needs approval  [a]pprove / [e]dit / [r]eject")
        typed = await ask("> ")
        choice = typed.lower()
        if choice in ("/quit", "/exit"):
            raise EOFError
        # The hash of what you saw: if the call changed meanwhile, the session refuses the decision.
        body: dict[str, Any] = {"call_id": item["call_id"], "by": self.by, "expected_args_sha256": item["args_sha256"]}
        if choice.startswith("a"):
            await self.update(handle, "approve_update", body)
        elif choice.startswith("e") and item["kind"] == "review":
            body["result"] = await ask("  the result the agent should see: ")
            await self.update(handle, "approve_update", body)
        elif choice.startswith("e"):
            body["args"] = await self.edited_args(item["args"])
            await self.update(handle, "approve_update", body)
        elif choice.startswith("r"):
            body["reason"] = await ask("  reason: ")
            await self.update(handle, "reject_update", body)
        elif choice:
            # Anything else is a new message: the session settles the call as "moved on".
            await self.update(handle, "user_message_update", {"text": typed, "by": self.by})

    async def edited_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Field by field: Enter keeps a value; JSON (a number, a list) is read as JSON."""
        edited = dict(args)
        for name, value in args.items():
            current = value if isinstance(value, str) else json.dumps(value)
            typed = await ask(f"  {name} [{current}]: ")
            if typed:
                edited[name] = typed if isinstance(value, str) else _json_or_text(typed)
        return edited

    async def answer_for(self, item: dict[str, Any]) -> Any:
        say(f"? {item['question']}")
        if item.get("fields"):
            form: dict[str, Any] = {}
            for field in item["fields"]:
                hint = "/".join(field.get("choices") or []) or field.get("type", "string")
                if field.get("description"):
                    hint += f", {field['description']}"
                if not field.get("required", True):
                    hint += ", optional"
                value = await ask(f"  {field['name']} ({hint}): ")
                if value:
                    form[field["name"]] = value
            return form
        if item.get("choices"):
            for number, choice in enumerate(item["choices"], 1):
                say(f"  {number}. {choice}")
            picked = await ask("> ")
            if picked.isdigit() and 1 <= int(picked) <= len(item["choices"]):
                return item["choices"][int(picked) - 1]
            return picked
        return await ask("> ") or None

    async def update(self, handle: WorkflowHandle[Any, Any], name: str, body: dict[str, Any]) -> bool:
        try:
            await execute_update_retrying(handle, name, body)
            return True
        except WorkflowUpdateFailedError as error:
            say(f"  refused: {getattr(error.cause, 'message', error)}")
            return False


def _json_or_text(typed: str) -> Any:
    try:
        return json.loads(typed)
    except json.JSONDecodeError:
        return typed
