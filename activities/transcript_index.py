"""The local activity that writes a run's transcript index into the run's own history.

A local activity's result is recorded (a marker event, through the data
converter and so encrypted with HITL_ENCRYPTION_KEY), its input is not: handing
the index in and getting it back puts it in history exactly once, where a reader
of the closed run finds it without replaying the run (workflows/transcript_index.py).
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from workflows.contract import KEEP_TRANSCRIPT_INDEX

ACTIVITY = KEEP_TRANSCRIPT_INDEX.name


@activity.defn(name=ACTIVITY)
async def keep_transcript_index(index: dict[str, Any]) -> dict[str, Any]:
    return index
