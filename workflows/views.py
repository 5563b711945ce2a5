"""What callers read: the session's queries, and paging within Temporal's 2 MB answer limit.

Queries only read. A query answer is not recorded in history, which is why the
model activity reads the conversation through `model_context` instead of
receiving it: each step then adds only what is new to the history.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from workflows.contract import PageRequest, SessionStatus
from workflows.agents import agent_of
from workflows.conversation import ChatMessage, Conversation, message_bytes
from workflows.events import EventsRequest
from workflows.limits import MODEL_WINDOW_BYTES, json_size
from workflows.requests import OPENING_BYTES, ConversationRef, ModelRequest, OpeningMessages
from workflows.session import DEFAULT_SYSTEM_PROMPT, view
from workflows.child_reports import ChildReports
from workflows.delegating import Delegating
from workflows.session_run import SessionRun
from workflows.waiting import Waiting

with workflow.unsafe.imports_passed_through():
    # The catalog holds tool schemas and approval policies; passed through so
    # the workflow sees the tools the worker registered, not a fresh copy.
    from hitl.catalog import CATALOG
    from hitl.catalog.delegates import delegate_spec

PAGE_BYTES = 1_500_000  # a query answer stays below Temporal's 2 MB



class Views:
    """A part of AgentWorkflow: the answers to its queries (the workflow registers the query handlers)."""

    def __init__(self, session: SessionRun, waiting: Waiting, delegating: Delegating, reports: ChildReports) -> None:
        self.session = session
        self.waiting = waiting
        self.delegating = delegating
        self.reports = reports

    def pending(self) -> list[dict[str, Any]]:
        return [*(item.view() for item in self.session.run_state.pauses.open), *self.reports.children_pending()]

    def status(self) -> SessionStatus:
        return SessionStatus(
            state=self.session.state,
            turn=self.session.run_state.turn,
            steps=self.session.run_state.steps,
            total_steps=self.session.run_state.total_steps,
            last_answer=self.session.run_state.last_answer,
            error=self.session.run_state.error,
            pending=len(self.session.run_state.pauses.open),
            queued_messages=len(self.session.run_state.inbox),
            ignored_signals=self.session.run_state.ignored_signals,
            remembered=[view(grant) for grant in self.waiting.live_grants()],
            tools=[spec.name for spec in self.tools_now()],
            model=self.session.config.model,
            closed_reason=self.session.closed_reason,
            transcript_messages=self.session.run_state.first_message_index + len(self.session.conversation.messages),
            owner=self.session.config.by,
            participants=self.session.config.participants,
            verified=self.session.config.verified_decisions,
        )

    def transcript(self) -> list[dict[str, Any]]:
        """The conversation, whole while it is small; past a megabyte, its newest part
        (`transcript_page` and `python starter.py transcript` read all of it)."""
        messages: list[dict[str, Any]] = self.transcript_page(PageRequest(offset=None, limit=1_000_000))["messages"]
        return messages

    def transcript_page(self, request: PageRequest | None = None) -> dict[str, Any]:
        """Messages [offset, offset+limit) of the whole transcript, or where to find them.

        A run holds the messages from `first_index` on; older ones are in the
        run it continued from (`earlier_run_id`): query that run by its run id.
        """
        messages = [message.to_openai() for message in self.session.conversation.messages]
        return self.page(messages, self.session.run_state.first_message_index, request, "messages")

    def audit(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.audit_page(PageRequest(offset=None, limit=1_000_000))["events"]
        return events

    def audit_page(self, request: PageRequest | None = None) -> dict[str, Any]:
        events = [event.model_dump(mode="json") for event in self.session.run_state.audit]
        return self.page(events, self.session.run_state.first_audit_index, request, "events")

    def events_after(self, request: EventsRequest | None = None) -> dict[str, Any]:
        """The session's events after an id (see workflows/events.py): what live clients follow."""
        return self.session.run_state.events.page(request or EventsRequest())

    def model_context(self, reference: ConversationRef) -> ModelRequest:
        """What the model activity sends: the system prompt, the tools and the messages a
        reference names, within the request budget. Queries are not recorded in history."""
        count = reference.message_count
        if count > len(self.session.conversation.messages) or (self.session.chain[count - 1] if count else "") != reference.prefix_sha256:
            raise ValueError("stale reference: this run does not hold that conversation")
        view_ = Conversation(messages=self.session.conversation.messages[:count]).window(MODEL_WINDOW_BYTES, self.session.run_state.first_message_index)
        return ModelRequest(
            messages=[ChatMessage(role="system", content=self.system_prompt()), *view_],
            tools=[spec.openai_schema() for spec in self.tools_now()],
            model=self.session.config.model,
        )

    def opening(self, count: int) -> OpeningMessages | None:
        """What `model_context` would answer for the first `count` messages, less the tools' schemas,
        when it is small enough to carry with the reference (workflows/requests.py, OpeningMessages).
        None when the model's window would not send the messages as they are, or when the session
        offers delegates (their tools are built by the workflow, not read from the catalog)."""
        system = self.system_prompt()
        messages = self.session.conversation.messages[:count]
        if not within_opening_bytes([ChatMessage(role="system", content=system), *messages]) or self.delegating.delegates():
            return None
        if Conversation(messages=messages).window(MODEL_WINDOW_BYTES, self.session.run_state.first_message_index) != messages:
            return None
        return OpeningMessages(system=system, messages=messages, tools=self.session.config.tools)

    def tools_now(self) -> list[Any]:
        """The tools this session offers the model now, from the worker's catalog.

        Read by queries only, never recorded: a tool an MCP server adds or drops
        changes the next model call, while what each call was allowed to do is
        the verdict recorded with the model's reply (docs/mcp.md)."""
        return [*CATALOG.select(self.session.config.tools),
                *(delegate_spec(tool, agent_of(tool) or "", agent.instructions) for tool, agent in self.delegating.delegates().items())]

    def page(self, items: list[dict[str, Any]], first: int, request: PageRequest | None, key: str) -> dict[str, Any]:
        """A page of what this run holds, within PAGE_BYTES; without an offset, the newest page."""
        request = request or PageRequest()
        total, limit = first + len(items), max(1, request.limit)
        newest_first = request.offset is None
        start = max(first, total - limit) if newest_first else min(max(request.offset or 0, first), total)
        window = items[start - first : start - first + limit]
        chosen: list[dict[str, Any]] = []
        size = 0
        for item in reversed(window) if newest_first else window:
            size += json_size(item)
            if chosen and size > PAGE_BYTES:
                break
            chosen.append(item)
        if newest_first:
            chosen.reverse()
            start = total - len(chosen) if window else total
        return {
            "offset": start, "total": total, "first_index": first, key: chosen,
            "earlier_run_id": workflow.info().continued_run_id if first else None,
        }

    def system_prompt(self) -> str:
        return self.session.config.system_prompt or DEFAULT_SYSTEM_PROMPT


def within_opening_bytes(messages: list[ChatMessage]) -> bool:
    """Whether these messages weigh at most OPENING_BYTES; stops counting once they do not."""
    weight = 0
    for message in messages:
        weight += message_bytes(message)
        if weight > OPENING_BYTES:
            return False
    return True
