"""What happened in a session, as a numbered stream for live clients.

The API's server-sent events, the web inbox and `starter.py watch` follow a
session through the `events` query: pauses opened and settled, tool results,
answers, messages, claims and state changes, each with an id that grows by one
for the whole life of the session (continue-as-new carries the counter).

Queries are not recorded, so following a session adds nothing to its history.
Only the newest events are kept (a bounded tail, carried to the next run); a
client that fell further behind is told so (`oldest`) and re-reads the state.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from workflows.limits import clip, json_size
from workflows.metrics import count_event

EVENTS_KEPT = 500
EVENTS_KEPT_BYTES = 400_000
TEXT_BYTES = 4_000  # a tool result or an answer, as an event shows it
PAGE_LIMIT = 500
PAGE_BYTES = 1_000_000  # a query answer stays well below Temporal's 2 MB


class SessionEvent(BaseModel):
    id: int
    at: datetime
    type: str
    data: dict[str, Any] = Field(default_factory=dict)


class EventsRequest(BaseModel):
    after: int = 0
    limit: int = 200


class EventLog(BaseModel):
    events: list[SessionEvent] = Field(default_factory=list)
    last_id: int = 0

    def add(self, type_: str, at: datetime, **data: Any) -> None:
        """Strings are clipped: an event is a notice, the transcript holds the whole text."""
        self.last_id += 1
        clipped = {key: clip(value, TEXT_BYTES) if isinstance(value, str) else value for key, value in data.items()}
        count_event(type_, at, clipped, self.events)  # the product's metrics (workflows/metrics.py)
        self.events.append(SessionEvent(id=self.last_id, at=at, type=type_, data=clipped))
        if len(self.events) > EVENTS_KEPT:
            del self.events[: len(self.events) - EVENTS_KEPT]

    def page(self, request: EventsRequest) -> dict[str, Any]:
        """Events after `after`, oldest first; `oldest` is the first id still kept."""
        limit = min(max(1, request.limit), PAGE_LIMIT)
        chosen: list[dict[str, Any]] = []
        size = 0
        for event in self.events:
            if event.id <= request.after:
                continue
            shown = event.model_dump(mode="json")
            size += json_size(shown)
            if len(chosen) == limit or (chosen and size > PAGE_BYTES):
                break
            chosen.append(shown)
        oldest = self.events[0].id if self.events else self.last_id + 1
        return {
            "events": chosen,
            "oldest": oldest,
            "last": self.last_id,
        }

    def carried(self) -> EventLog:
        """The tail a new run starts with, within EVENTS_KEPT_BYTES."""
        kept: list[SessionEvent] = []
        size = 0
        for event in reversed(self.events):
            size += json_size(event.model_dump(mode="json"))
            if size > EVENTS_KEPT_BYTES:
                break
            kept.append(event)
        return EventLog(events=list(reversed(kept)), last_id=self.last_id)
