"""Every pause has a deadline; a day later the model is told and the turn goes on.

These run on a dev server with per-workflow time skipping, so a 24-hour wait
takes a moment. The server skips as soon as the session waits on nothing but its
deadline, so the pause is read afterwards, from the audit, not caught while open:
a busy machine's query could come after the skip.
"""

from __future__ import annotations

from tests.support.sessions import Agent, assert_well_formed


async def test_an_approval_nobody_gives_times_out_after_a_day(skipping_agent: Agent) -> None:
    session = await skipping_agent.start("please delete notes.txt")
    summary = await session.result()  # time skips past the approval, then past the idle timeout

    transcript = await session.query("transcript")
    result = next(m for m in transcript if m["role"] == "tool")
    assert result["content"] == "No answer within 86400 seconds; cancelled. The tool did not run."
    assert transcript[-1]["content"].startswith("I did not delete notes.txt")
    assert (skipping_agent.workspace / "notes.txt").exists()
    assert summary.reason.startswith("idle for")
    assert_well_formed(transcript)
    events = [event["event"] for event in await session.query("audit")]
    assert events.index("requested") < events.index("timed_out")


async def test_an_unanswered_question_times_out_with_its_own_timeout(skipping_agent: Agent) -> None:
    session = await skipping_agent.start(
        "book me a flight to Beijing on 2026-12-24", answer_timeout_seconds=3600, approval_timeout_seconds=60
    )
    await session.result()

    [asked] = [event for event in await session.query("audit") if event["event"] == "requested"]
    assert asked["rule"] == "question"
    transcript = await session.query("transcript")
    answer = next(m for m in transcript if m.get("tool_call_id") == asked["call_id"])
    assert answer["content"] == "No answer within 3600 seconds; cancelled. The tool did not run."
    assert "cannot book the flight" in transcript[-1]["content"]
    assert_well_formed(transcript)


async def test_an_idle_session_closes_after_its_idle_timeout(skipping_agent: Agent) -> None:
    session = await skipping_agent.start("hello", idle_timeout_seconds=7200)
    summary = await session.result()
    assert summary.state == "closed" and summary.reason == "idle for 7200 seconds"
    assert summary.turns == 1
