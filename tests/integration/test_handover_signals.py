"""Signals that come in the workflow task a run hands over in reach the next run.

sdk-core can hand a local activity's result to the workflow in an activation of its own and the
signals of the same workflow task in the next one; after a failed task, the replay splits them the
same way. A run that continued as new on the result alone had chosen what to carry before those
signals were handled: under load, signals sent as a session handed over (refusals here; a decision or a message
the same way) were lost (tests/histories/legacy/signals_lost_at_a_hand_over--*.json, recorded
beside two CPU hogs). Runs now continue as new in the task of a timer of their own, whose firing
comes with every signal of its task (workflows/continuing.py, hand_over).

Both histories were recorded by the catalogue's "a 1 MB `call_id`, four times" (the four signals
refused, each recorded in `status.ignored_signals`); the replays show the split and what was carried.
"""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from tests.support.activations import ActivationLog, replay_logged

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


def history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem.split("--")[1], path.read_text())


def signals_in(recorded: WorkflowHistory) -> int:
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in recorded.events)


def signals_after_the_last_local_activity(log: ActivationLog) -> int:
    """Signal jobs in activations of their own after the run's last activity result (here the
    transcript index's local activity, the hand-over's last): the race."""
    last = max(i for i, a in enumerate(log.activations) if "resolve_activity" in a.jobs)
    return sum(a.jobs.count("signal_workflow") for a in log.activations[last + 1:] if set(a.jobs) == {"signal_workflow"})


async def test_signals_that_come_while_a_run_hands_over_are_carried() -> None:
    [path] = (HISTORIES / "races").glob("signals_in_the_hand_over_task--*.json")
    recorded = history(path)
    log = await replay_logged(recorded)
    assert signals_after_the_last_local_activity(log) == 4, "the history no longer holds the race: " + json.dumps(
        [a.jobs for a in log.activations[-4:]])
    carried = log.handed_over_with()["carried"]
    assert len(carried["ignored_signals"]) == signals_in(recorded) == 4


async def test_a_run_that_handed_over_on_a_local_activity_result_alone_lost_them() -> None:
    """Why the patch exists: the same race, recorded before it, replays on today's workers (the
    legacy corpus replays it too) and carries none of the signals that came after the result
    (this run's one: the other three came after it had ended, to the next run)."""
    [path] = (HISTORIES / "legacy").glob("signals_lost_at_a_hand_over--*.json")
    recorded = history(path)
    log = await replay_logged(recorded)
    assert signals_after_the_last_local_activity(log) == signals_in(recorded) == 1
    assert log.handed_over_with()["carried"]["ignored_signals"] == []
