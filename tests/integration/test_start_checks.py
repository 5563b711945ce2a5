"""A run's start asks the worker what it needs in one round of local activities.

Each round of local activities is a wait inside the start's workflow task, and a query that comes
with that task makes sdk-core complete the task once a round ends: the start then costs a second
task. The checks themselves stay whole: rules that name an unknown tool are still refused.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowFailureError, WorkflowHistory

from tests.support.sessions import Agent, in_time, pending_items
from workflows.contract import SESSION_FACTS, UNKNOWN_TOOLS


def local_activity_type(event: HistoryEvent) -> str | None:
    """The activity type a local activity's marker names (sdk-core's marker data), else None."""
    data = event.marker_recorded_event_attributes.details.get("data")
    if data is None or not data.payloads:
        return None
    text = data.payloads[0].data.decode(errors="replace")
    for field in ('"activity_type":"', '"activity_type": "'):
        if field in text:
            return text.split(field, 1)[1].split('"', 1)[0]
    return None


def start_markers(history: WorkflowHistory) -> list[str]:
    """The start's local activities, in the order their markers were recorded."""
    found: list[str] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            break  # the first model call: the start is over
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            kind = local_activity_type(event)
            if kind is not None:
                found.append(kind)
    return found


async def test_rules_that_name_no_tool_start_with_one_local_activity(agent: Agent) -> None:
    """Rules that name no tool leave the catalog nothing to check: the start asks only for the
    session's facts."""
    session = await agent.start("please delete notes.txt")
    [item] = await pending_items(session)
    assert item["tool"] == "delete_file"
    assert start_markers(await session.fetch_history()) == [SESSION_FACTS.name]


async def test_rules_that_name_tools_are_checked_with_the_facts(agent: Agent) -> None:
    """Both local activities are asked (together: see tests/unit/test_workflow_parts.py); in which
    tasks their markers land is sdk-core's to say, as queries come."""
    session = await agent.start("please delete notes.txt", require_approval=["delete_file"])
    [item] = await pending_items(session)
    assert item["tool"] == "delete_file"
    markers = start_markers(await session.fetch_history())
    assert sorted(markers) == sorted([UNKNOWN_TOOLS.name, SESSION_FACTS.name]), markers


async def test_rules_that_name_an_unknown_tool_are_still_refused_at_start(agent: Agent) -> None:
    session = await agent.start("hello", auto_approve=["delete_fiel"])
    try:
        await in_time(session.result(), what="the session refused at start")
    except WorkflowFailureError as failure:
        message = str(getattr(failure.cause, "message", failure.cause))
        assert "invalid session input" in message and "no tool named 'delete_fiel'" in message, message
    else:
        raise AssertionError("a session whose rules name an unknown tool started")
