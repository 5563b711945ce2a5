"""A decision right after a local activity reads the history as a replay of it will.

sdk-core can give a local activity's result to the code in a later workflow task than the one
whose completion recorded its marker (it did when it answered a query meanwhile), and a replay
gives it in the marker's task. In a history of a build before the first supported one (see
docs/observability.md), the code read 22 events live, past the run's budget of 20, and began its
hand-over; the replay read 18, waited with a timer instead, and failed every task. Here the local activity returns in either task, as it can
live and in a replay, and the run must decide the same in both.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio import workflow

from workflows.activity_calls import LocalChecks
from workflows.continuing import Continuing
from workflows.handover import HISTORY_BYTES_LIMIT
from workflows.patches import Behaviours
from workflows.waiting import HISTORY_EVENTS_CRITICAL, Waiting

BUDGET = 20
STARTED_AT = 18  # the task the local activity started in, and its marker's
LATE = 22  # the task sdk-core gave its result in, live


@dataclass
class Task:
    """The workflow task the code runs in, as `workflow.info()` tells it."""

    length: int
    size: int = 3_000

    def get_current_history_length(self) -> int:
        return self.length

    def get_current_history_size(self) -> int:
        return self.size


class Session:
    """The two parts these tests read the history through, sharing one LocalChecks as AgentWorkflow's do."""

    def __init__(self) -> None:
        self.checks = LocalChecks()
        state = SimpleNamespace(behaviours=Behaviours(), config=SimpleNamespace(continue_as_new_after_events=BUDGET),
                                hand_over_blocked=False)
        self.continuing = Continuing(state, self.checks)  # type: ignore[arg-type]  # the fields it reads

    async def local_activity(self, name: str, arg: Any) -> Any:
        return await self.checks.local_activity(name, arg)

    def history_moved_on(self) -> None:
        self.checks.history_moved_on()

    def history_reading(self) -> Any:
        return self.checks.history_reading()

    def history_is_long(self) -> bool:
        return self.continuing.history_is_long()


@pytest.fixture
def task(monkeypatch: pytest.MonkeyPatch) -> Task:
    current = Task(STARTED_AT)
    monkeypatch.setattr(workflow, "info", lambda: current)
    return current


def returning_in(task: Task, length: int, size: int | None = None) -> Any:
    """A local activity whose result the code is given in the task at `length` events."""
    async def execute_local_activity(*args: Any, **kwargs: Any) -> str:
        task.length = length
        task.size = size if size is not None else task.size
        return "verdict"
    return execute_local_activity


@pytest.mark.parametrize("given_in", [STARTED_AT, LATE], ids=["in its marker's task (a replay)", "a task later (live)"])
async def test_the_decision_after_a_local_activity_does_not_depend_on_the_task_its_result_came_in(
        task: Task, monkeypatch: pytest.MonkeyPatch, given_in: int) -> None:
    session = Session()
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in(task, given_in))
    assert await session.local_activity("judge_calls", None) == "verdict"
    assert session.history_is_long() is False  # as at 18 events, whichever task the code is in


async def test_size_is_read_as_of_the_start_too(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session()
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in(task, LATE, size=HISTORY_BYTES_LIMIT))
    await session.local_activity("judge_calls", None)
    assert session.history_is_long() is False
    critical = SimpleNamespace(checks=session.checks)
    assert Waiting.history_is_critical(critical) is False  # type: ignore[arg-type]


async def test_the_history_is_read_afresh_once_an_event_of_its_own_reaches_the_code(
        task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal, an accepted Update, an activity's outcome or a timer: met in the same task live and replayed."""
    session = Session()
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in(task, LATE))
    await session.local_activity("judge_calls", None)
    session.history_moved_on()
    assert session.history_is_long() is True
    task.length = HISTORY_EVENTS_CRITICAL
    assert session.history_reading().length == HISTORY_EVENTS_CRITICAL


def returning_in_after_a_signal(task: Task, session: Session, length: int) -> Any:
    """Live, a late result can come in one activation with a signal, whose handler runs first."""
    async def execute_local_activity(*args: Any, **kwargs: Any) -> str:
        task.length = length
        session.history_moved_on()  # the signal's handler (signal_or_record)
        return "verdict"
    return execute_local_activity


async def test_a_signal_given_with_a_late_result_reads_as_the_replay_does(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live: [signal, result] at 22. Replayed: [result] at 18, then [signal] at 22. The code after
    the result reads 18 in both; what it waits on reads 22 once the signal is in, in both."""
    live = Session()
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in_after_a_signal(task, live, LATE))
    await live.local_activity("judge_calls", None)
    after_the_result_live = live.history_is_long()
    await asyncio.sleep(0)  # the code after the result waits; the activation's conditions are read
    once_waiting_live = live.history_is_long()

    task.length = STARTED_AT
    replayed = Session()
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in(task, STARTED_AT))
    await replayed.local_activity("judge_calls", None)
    after_the_result_replayed = replayed.history_is_long()
    task.length = LATE
    replayed.history_moved_on()  # the signal, in its own task
    once_waiting_replayed = replayed.history_is_long()

    assert (after_the_result_live, once_waiting_live) == (after_the_result_replayed, once_waiting_replayed) == (False, True)


async def test_a_chain_of_local_activities_reads_as_of_the_first(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second starts in the activation that gave the first's result: at 22 live, 18 replayed."""
    session = Session()
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in(task, LATE))
    await session.local_activity("catalog_verdicts", None)
    monkeypatch.setattr(workflow, "execute_local_activity", returning_in(task, LATE + 2))
    await session.local_activity("judge_calls", None)
    assert session.history_reading().length == STARTED_AT
