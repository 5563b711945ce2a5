"""The activities that write a run's transcript index into the run's own history.

Runs since `hand-over-after-its-index-activity` (workflows/patches.py) record it
as the input of an ordinary activity that does nothing with it: the input is
recorded once (ActivityTaskScheduled, through the data converter and so
encrypted with HITL_ENCRYPTION_KEY), where a reader of the closed run finds it
without replaying the run (workflows/transcript_index.py), and the activity's
completion starts the workflow task the run continues as new in
(workflows/continuing.py, hand_over).

Runs before it used a local activity, whose input is not recorded and whose
result is: it handed the index back. It stays for those runs, still live or replayed.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from workflows.contract import KEEP_TRANSCRIPT_INDEX, RECORD_TRANSCRIPT_INDEX


@activity.defn(name=KEEP_TRANSCRIPT_INDEX.name)
async def keep_transcript_index(index: dict[str, Any]) -> dict[str, Any]:
    return index


@activity.defn(name=RECORD_TRANSCRIPT_INDEX.name)
async def record_transcript_index(index: dict[str, Any] | None) -> None:
    """Its input is the record; nothing to do."""
