"""A long session continues as new between turns and keeps what it knows."""

from __future__ import annotations

from tests.support.sessions import Agent, assert_well_formed, eventually, pending_items, query, settled


async def test_a_session_continues_as_new_and_keeps_transcript_audit_and_memory(agent: Agent) -> None:
    for name in ("a.txt", "b.txt"):
        (agent.workspace / name).write_text(name)
    session = await agent.start("please delete a.txt", continue_as_new_after_events=20, by="ana")
    first_run = (await session.describe()).run_id
    await pending_items(session)
    await session.execute_update("approve_update", {"by": "bo", "remember": {"scope": "tool", "for_seconds": 3600}})

    latest = agent.client.get_workflow_handle(session.id)
    await eventually(lambda: latest.describe(), lambda d: d.run_id != first_run)
    status = await settled(latest)
    assert status["turn"] == 1 and status["last_answer"] == "Deleted a.txt."

    await latest.execute_update("user_message_update", {"text": "please delete b.txt", "by": "ana"})
    status = await eventually(lambda: query(latest, "status"), lambda s: s["turn"] == 2 and s["state"] == "idle")
    assert status["last_answer"] == "Deleted b.txt." and not (agent.workspace / "b.txt").exists()

    transcript = await query(latest, "transcript")
    assert [m["content"] for m in transcript if m["role"] == "user"] == ["please delete a.txt", "please delete b.txt"]
    assert_well_formed(transcript)
    events = [e["event"] for e in await query(latest, "audit")]
    assert events == ["requested", "approved", "auto_approved"], "the remembered approval crossed the new run"
