"""The interactive chat: type messages, decide approvals, answer questions.

It holds no state of its own: everything comes from the session's queries, so
quitting and starting again reattaches to the same session where it paused.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from hitl.client.events import PAGE, EventsUnavailable, SessionEvent, read_events
from hitl.console.progress import Activity, WorkingIndicator
from hitl.console.render import args_diff, context_lines, field_hint, headline, render_message, say, shown
from hitl.client.summary import session_summary
from hitl.client.updates import execute_update_retrying
from hitl.client.workers import session_queue, unpolled_queue_line
from hitl.settings import ENCRYPTED
from workflows.contract import (
    ANSWER, APPROVE, CANCEL, PENDING, REJECT, STATUS, TRANSCRIPT, USER_MESSAGE, WORKFLOW, WORKFLOW_RESULT, Update,
)

POLL_SECONDS = 0.2
RETRY_CHECK_EVERY = 5  # polls: a describe a second while the agent works
CHOICES_HINT = "[a]pprove / [e]dit / [r]eject"
DECISIONS = {"a": "approve", "approve": "approve", "e": "edit", "edit": "edit", "r": "reject", "reject": "reject"}
HELP = """commands:
  /help    this list (nothing is sent to the agent)
  /cancel  end the session; whatever waits is cancelled
  /quit    leave the session where it is (Ctrl-C and Ctrl-D too); run the same command to reattach
at a decision: a / approve, e / edit, r / reject (exactly; anything else is not taken as a decision)"""


def is_command(text: str) -> bool:
    """`/help`, `/cancel`, ...: a slash and a word, alone (a message may well start with a path)."""
    return re.fullmatch(r"/[A-Za-z]+", text.strip()) is not None


def command_help(text: str) -> str:
    if text == "/help":
        return HELP
    if text == "/cancel":
        return "(nothing to cancel yet: the session starts with your first message)"
    return f"(unknown command {text}; nothing was sent)\n{HELP}"


def decision_of(typed: str) -> str | None:
    """"approve", "edit" or "reject" for an unambiguous choice (README.md, "A first hour":
    at a decision only a, e or r decide); None for anything else, which is never taken as approval or rejection."""
    return DECISIONS.get(typed.strip().lower())


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
    def __init__(self, client: Client, task_queue: str, session_id: str, by: str,
                 started_with: str = "starter.py chat", check_worker: bool = True) -> None:
        self.client = client
        self.check_worker = check_worker  # the demo runs its own worker, which may not have polled yet
        self.started_with = started_with
        self.task_queue = task_queue
        self.session_id = session_id
        self.by = by
        self.shown = 0
        self.echo_user = True  # show the history once when reattaching; after that you typed it
        self.indicator = WorkingIndicator()
        self.activity = Activity()
        self.events_seen = 0  # the spinner line's tool comes from the session's events
        self.polls = 0
        self.cards_shown: set[str] = set()
        self.retries_told: set[tuple[str | None, str]] = set()

    async def run(self) -> int:
        say(f"(session {self.session_id}; Ctrl-C or Ctrl-D leaves it where it is, /cancel ends it)")
        if problem := await self.missing_worker():
            say(f"error: {problem}", file=sys.stderr)
            return 1
        try:
            handle = await self.attach()
            while True:
                status = await self.settle(handle)
                if status["state"] == "closed":
                    say(f"(session closed: {status.get('closed_reason')})")
                    return 0
                pending = await handle.query(PENDING.name)
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
                if is_command(text) and text != "/cancel":
                    say(command_help(text))  # commands are for the chat: none of them reaches the model
                    continue
                if text == "/cancel":
                    await self.update(handle, CANCEL.update, {"reason": "cancelled from the chat"})
                elif text:
                    await self.update(handle, USER_MESSAGE.update, {"text": text, "by": self.by})
        except (EOFError, KeyboardInterrupt):
            self.leave()
            return 0
        except asyncio.CancelledError:
            self.leave()
            raise

    async def missing_worker(self) -> str | None:
        """Without a worker, the session's first query would wait a minute and time out: say it now."""
        if not self.check_worker:
            return None
        task_queue = await session_queue(self.client, self.session_id) or self.task_queue
        return await unpolled_queue_line(self.client, task_queue)

    def leave(self) -> None:
        say(f"\n(left session {self.session_id}; it keeps its place: run the same command to reattach)")

    async def attach(self) -> WorkflowHandle[Any, Any]:
        handle = self.client.get_workflow_handle(self.session_id)
        try:
            description = await handle.describe()
            if description.status is not None and description.status.name == "RUNNING":
                say(f"(reattached to session {self.session_id})")
                return handle
            ended = description.status.name.lower().replace("_", " ") if description.status else "ended"
            say(f"(session {self.session_id} has ended ({ended}); your first message starts a new session "
                  f"with the same id: `--session <another id>` keeps them apart)")
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
        first = ""
        while not first:
            first = await ask("You: ")
            if first in ("/quit", "/exit"):
                raise EOFError
            if is_command(first):
                say(command_help(first))
                first = ""
        self.echo_user = False
        request = {"message": first, "by": self.by}
        summary, details = session_summary(request, self.session_id, started_with=self.started_with, encrypted=ENCRYPTED)
        return await self.client.start_workflow(  # type: ignore[call-overload]  # plain payloads, not str: see hitl/client/summary.py
            WORKFLOW, request, id=self.session_id, task_queue=self.task_queue, result_type=WORKFLOW_RESULT,
            static_summary=summary, static_details=details,
        )

    async def settle(self, handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
        """Show the conversation as it grows until the session waits for someone,
        with a spinner line (on a terminal) while the agent works."""
        try:
            while True:
                status = await handle.query(STATUS.name)
                await self.show_new_messages(handle)
                if status["state"] != "running" and not status["queued_messages"]:
                    self.indicator.stop()
                    if status.get("error"):
                        say(f"(error: {status['error']})")
                    return status
                await self.show_retries(handle)
                await self.show_progress(handle, status)
                await asyncio.sleep(POLL_SECONDS)
        finally:
            self.indicator.stop()

    async def show_retries(self, handle: WorkflowHandle[Any, Any]) -> None:
        """A model or tool call that keeps failing (an endpoint that cannot be reached, say): one line
        when it first retries, and the spinner counts the attempts. Temporal keeps the attempt and the
        last failure of a running activity; describing the session once a second reads them."""
        self.polls += 1
        if self.polls % RETRY_CHECK_EVERY:
            return
        try:
            description = await handle.describe()
        except RPCError:
            return
        retrying = [a for a in description.raw_description.pending_activities if a.attempt > 1]
        self.activity.retrying = None
        for pending in retrying:
            name = pending.activity_type.name
            self.activity.retrying = f"{'the model' if name == 'call_model' else name}: retrying (attempt {pending.attempt})"
            key = (description.run_id, pending.activity_id)
            if key in self.retries_told:
                continue
            self.retries_told.add(key)
            why = pending.last_failure.message
            try:
                why = str(await self.client.data_converter.decode_failure(pending.last_failure)) or why
            except Exception:  # an undecodable failure still has its plain message
                pass
            what = "the model call" if name == "call_model" else f"{name}"
            self.indicator.stop()
            say(f"({what} failed: {why}; Temporal retries it until it answers, the line below counts the "
                  "attempts; Ctrl-C leaves the session as it is)" if self.indicator.enabled else
                  f"({what} failed: {why}; Temporal retries it until it answers; Ctrl-C leaves the session as it is)")

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
            answer = await read_events(self.client, handle.id, self.events_seen, PAGE)
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
        while await handle.query(PENDING.name) == pending:
            await asyncio.sleep(POLL_SECONDS * 5)

    async def show_new_messages(self, handle: WorkflowHandle[Any, Any]) -> None:
        transcript = await handle.query(TRANSCRIPT.name)
        for message in transcript[self.shown :]:
            if message["role"] == "user" and not self.echo_user:
                continue
            for line in render_message(message):
                say(line)
        self.shown = len(transcript)
        self.echo_user = False

    async def decide(self, handle: WorkflowHandle[Any, Any], item: dict[str, Any]) -> None:
        if item["kind"] == "question":
            self.show_card(item)
            answer = await self.answer_for(item)
            if answer is not None:
                await self.update(handle, ANSWER.update, {"call_id": item["call_id"], "answer": answer, "by": self.by, "via": "terminal"})
            return
        self.show_card(item)
        if item["kind"] == "review":
            say("\n".join(f"    | {line}" for line in (item.get("result") or "").splitlines()))
        say(f"  {CHOICES_HINT}")
        # The hash of what you saw: if the call changed meanwhile, the session refuses the decision.
        body: dict[str, Any] = {"call_id": item["call_id"], "by": self.by, "via": "terminal",
                                "expected_args_sha256": item["args_sha256"]}
        while True:
            typed = await ask("> ")
            if typed.lower() in ("/quit", "/exit"):
                raise EOFError
            choice = decision_of(typed)
            if choice == "approve":
                await self.update(handle, APPROVE.update, body)
                return
            if choice == "edit" and item["kind"] == "review":
                body["result"] = await ask("  the result the agent should see: ")
                await self.update(handle, APPROVE.update, body)
                return
            if choice == "edit":
                edited = await self.edited_args(item["args"])
                changes = args_diff(item["args"], edited)
                if not changes:
                    say(f"  (nothing changed; {CHOICES_HINT})")
                    continue
                say("  your edits, against the model's arguments:")
                say("\n".join(f"    {line}" for line in changes))
                if (await ask("  approve with these edits? [y/N] ")).lower() in ("y", "yes"):
                    await self.update(handle, APPROVE.update, {**body, "args": edited})
                    return
                say(f"  (not approved; {CHOICES_HINT})")
                continue
            if choice == "reject":
                body["reason"] = await ask("  reason: ")
                await self.update(handle, REJECT.update, body)
                return
            if not typed or typed == "/help":
                say(f"  {CHOICES_HINT}; anything else may be sent to the agent as a new message")
                continue
            # Neither approval nor rejection: only a clear yes sends it on (which settles the call as "moved on").
            say(f"  that is not a decision ({CHOICES_HINT}).")
            if (await ask("  send it to the agent as a new message instead? The call would not run. [y/N] ")).lower() in ("y", "yes"):
                await self.update(handle, USER_MESSAGE.update, {"text": typed, "by": self.by})
                return
            say(f"  (not sent; the call still waits: {CHOICES_HINT})")

    def show_card(self, item: dict[str, Any]) -> None:
        """The call and what a person needs to decide it; once per call (a refused answer asks again
        without repeating it). In your own chat, your own message needs no quoting back."""
        if item["call_id"] in self.cards_shown:
            say(headline(item))
            return
        self.cards_shown.add(item["call_id"])
        card = dict(item)
        if card.get("requested_by") == self.by:
            card.pop("led_by", None)
        if card["kind"] == "question":  # the model asked: that is what a question is, and what its tool does
            card.pop("because", None)
            card.pop("description", None)
        say("\n".join([headline(card), *context_lines(card)]))

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
        if item.get("fields"):
            form: dict[str, Any] = {}
            for field in item["fields"]:
                value = await ask(f"  {field['name']} ({field_hint(field)}): ")
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

    async def update(self, handle: WorkflowHandle[Any, Any], request: Update[Any, Any], body: dict[str, Any]) -> bool:
        try:
            await execute_update_retrying(handle, request, body)
            return True
        except WorkflowUpdateFailedError as error:
            say(f"  refused: {getattr(error.cause, 'message', error)}")
            return False


def _json_or_text(typed: str) -> Any:
    try:
        return json.loads(typed)
    except json.JSONDecodeError:
        return typed
