"""Reading a closed run's transcript from its history (hitl/client/run_history.py) answers exactly
what the queries give, or None so that the caller reads by queries: never an error. Anyone who
reaches the frontend may send a signal whose payload this client cannot decode (an encoding it
does not know, JSON that is not JSON, a payload sealed with a key it lacks); the workflow refuses
such a signal and goes on, and its transcript must stay readable."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from hitl.client.run_history import LOCAL_ACTIVITY_MARKER, closed_run_part
from hitl.settings import data_converter
from workflows.contract import KEEP_TRANSCRIPT_INDEX, RECORD_TRANSCRIPT_INDEX
from workflows.conversation import ChatMessage
from workflows.transcript_index import transcript_index

LONG = "a long tool result " * 60


def json_payload(value: Any) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def index_event(index: Any, recorded_as: str) -> HistoryEvent:
    """The index as a run records it: its activity's input, or (runs before that) its local activity's marker."""
    converter = data_converter(None).payload_converter
    if recorded_as == "activity":
        scheduled = HistoryEvent(event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        scheduled.activity_task_scheduled_event_attributes.activity_type.name = RECORD_TRANSCRIPT_INDEX.name
        scheduled.activity_task_scheduled_event_attributes.input.payloads.extend(converter.to_payloads([index]))
        return scheduled
    marker = HistoryEvent(event_type=EventType.EVENT_TYPE_MARKER_RECORDED)
    attributes = marker.marker_recorded_event_attributes
    attributes.marker_name = LOCAL_ACTIVITY_MARKER
    attributes.details["data"].payloads.extend(converter.to_payloads([{"activity_type": KEEP_TRANSCRIPT_INDEX.name}]))
    attributes.details["result"].payloads.extend(converter.to_payloads([index]))
    return marker


def history(*strange: Payload, recorded_as: str = "activity", index: Any = "made") -> list[HistoryEvent]:
    messages = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content=LONG)]
    started = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
    started.workflow_execution_started_event_attributes.input.payloads.append(json_payload({"message": "hi"}))
    reply = HistoryEvent(event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    reply.activity_task_completed_event_attributes.result.payloads.append(json_payload({"content": LONG}))
    signals = []
    for payload in strange:
        signal = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
        signal.workflow_execution_signaled_event_attributes.input.payloads.append(payload)
        signals.append(signal)
    recorded = transcript_index(0, messages) if index == "made" else index
    return [started, reply, *signals, index_event(recorded, recorded_as)]


@dataclass
class History:
    events: list[HistoryEvent]


@dataclass
class Handle:
    events: list[HistoryEvent]

    async def fetch_history(self, **kwargs: Any) -> History:
        return History(self.events)


@dataclass
class Client:
    events: list[HistoryEvent]
    data_converter: Any = field(default_factory=lambda: data_converter(None))

    def get_workflow_handle(self, *args: Any, **kwargs: Any) -> Handle:
        return Handle(self.events)


@pytest.mark.parametrize("recorded_as", ["activity", "marker"])
async def test_a_plain_history_is_rebuilt(recorded_as: str) -> None:
    part = await closed_run_part(Client(history(recorded_as=recorded_as)), "s", "r")  # type: ignore[arg-type]
    assert part is not None and part.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": LONG}]


async def test_a_run_that_recorded_no_index_is_read_by_queries() -> None:
    """A run too large to index still records its activity (the task it hands over in), with None."""
    assert await closed_run_part(Client(history(index=None)), "s", "r") is None  # type: ignore[arg-type]


async def test_a_signal_this_client_cannot_decode_does_not_break_the_read() -> None:
    strange = [
        Payload(metadata={"encoding": b"made/up"}, data=b"x"),
        Payload(metadata={"encoding": b"json/plain"}, data=b"{not json"),
        Payload(metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"k"}, data=b"\0" * 40),
    ]
    for payload in strange:
        part = await closed_run_part(Client(history(payload)), "s", "r")  # type: ignore[arg-type]
        assert part is not None and part.messages[1] == {"role": "assistant", "content": LONG}


async def test_an_encrypted_reader_skips_a_payload_sealed_under_a_key_it_lacks() -> None:
    from tests.support.stack import new_key

    garbage = Payload(metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"not-ours"}, data=b"\0" * 40)
    client = Client(history(garbage), data_converter(new_key()))
    part = await closed_run_part(client, "s", "r")  # type: ignore[arg-type]
    assert part is not None and part.messages[1] == {"role": "assistant", "content": LONG}
