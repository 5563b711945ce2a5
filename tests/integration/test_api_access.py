"""Who may see and act on a session, through the real API: a stranger finds nothing, an approver
reads and decides but does not steer, a claim needs the right to decide and lasts at most an hour."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually

READS = ("", "/pending", "/transcript", "/audit")


async def every_door(api: Api, person: str, session: str, call: str) -> dict[str, int]:
    """The status of each read and each action on `session` as `person` (actions with a body
    the access table refuses before anything is sent to the session)."""
    answers: dict[str, int] = {}
    async with api.as_(person) as http:
        for read in READS:
            answers[f"GET {read or '/'}"] = (await http.get(f"/sessions/{session}{read}")).status_code
        async with http.stream("GET", f"/sessions/{session}/events") as stream:  # a stream that opens stays open
            answers["GET /events"] = stream.status_code
        answers["POST /events/ticket"] = (await http.post(f"/sessions/{session}/events/ticket")).status_code
        answers["POST /messages"] = (await http.post(f"/sessions/{session}/messages", json={"text": "stop that"})).status_code
        answers["POST /cancel"] = (await http.post(f"/sessions/{session}/cancel", json={})).status_code
        for verb in ("approve", "reject", "claim"):
            answers[verb] = (await http.post(f"/sessions/{session}/calls/{call}/{verb}", json={})).status_code
    return answers


async def test_someone_with_no_part_in_a_session_finds_nothing_and_changes_nothing(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]

    seen_by_dave = await every_door(api, "dave", session, call)
    unknown = await every_door(api, "dave", "no-such-session", call)
    assert set(seen_by_dave.values()) == {404}, seen_by_dave
    assert seen_by_dave == unknown  # exactly as for a session that does not exist
    async with api.as_("dave") as dave:
        assert (await dave.get(f"/sessions/{session}")).json() == {"detail": f"unknown session {session!r}"}

    async with api.as_("ana") as ana:
        assert [item["call_id"] for item in (await ana.get(f"/sessions/{session}/pending")).json()] == [call]
        assert (await ana.get(f"/sessions/{session}")).json()["state"] == "awaiting_human"
    assert (api.agent.workspace / "notes.txt").exists()


async def test_an_approver_reads_and_decides_but_does_not_steer_and_sees_no_more_once_decided(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("bob") as bob:
        for read in READS:
            assert (await bob.get(f"/sessions/{session}{read}")).status_code == 200, read
        message = await bob.post(f"/sessions/{session}/messages", json={"text": "never mind, delete everything"})
        assert message.status_code == 403, message.text
        assert "only its owner, participants and the operators" in message.json()["detail"]
        assert (await bob.post(f"/sessions/{session}/cancel", json={})).status_code == 403
        approved = await bob.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert approved.status_code == 200, approved.text
    async with api.as_("ana") as ana:
        await eventually(lambda: ana.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        owners_own = await ana.post(f"/sessions/{session}/messages", json={"text": "thanks"})
        assert owners_own.status_code == 200, owners_own.text
    async with api.as_("bob") as bob:  # nothing waits for bob there any more
        assert (await bob.get(f"/sessions/{session}/transcript")).status_code == 404


async def test_a_claim_needs_the_right_to_decide_lasts_at_most_an_hour_and_stays_in_the_others_inbox(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob", "carol"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    url = f"/sessions/{session}/calls/{call}"
    async with api.as_("dave") as dave, api.as_("ana") as ana, api.as_("bob") as bob, api.as_("carol") as carol:
        assert (await dave.post(f"{url}/claim", json={"for_seconds": 60})).status_code == 404
        owner = await ana.post(f"{url}/claim", json={"for_seconds": 60})  # her session, not her call to decide
        assert owner.status_code == 403, owner.text
        assert "ana may not decide delete_file" in owner.json()["detail"]
        a_day = await bob.post(f"{url}/claim", json={"for_seconds": 86400})
        assert a_day.status_code == 422, a_day.text
        assert "3600" in a_day.text

        claimed = await bob.post(f"{url}/claim", json={"for_seconds": 3600})
        assert claimed.status_code == 200, claimed.text
        rows = await eventually(lambda: inbox(carol), lambda rows: any(row["claimed_by"] == "bob" for row in rows))
        [row] = [row for row in rows if row["call_id"] == call]
        until = datetime.fromisoformat(row["claim_until"].replace("Z", "+00:00"))
        assert until <= datetime.now(timezone.utc) + timedelta(hours=1)
        assert (await carol.post(f"{url}/approve", json={})).status_code == 409
    assert (api.agent.workspace / "notes.txt").exists()


async def inbox(http: Any) -> list[dict[str, Any]]:
    answer = await http.get("/inbox")
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_participants_read_message_and_decide_like_the_owner_and_others_do_not(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", participants=["bob"])
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("bob") as bob, api.as_("carol") as carol:
        assert (await bob.get(f"/sessions/{session}/transcript")).status_code == 200
        assert (await carol.get(f"/sessions/{session}/transcript")).status_code == 404
        assert [row["call_id"] for row in await inbox(bob) if row["session_id"] == session] == [call]
        assert [row for row in await inbox(carol) if row["session_id"] == session] == []
        approved = await bob.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert approved.status_code == 200, approved.text
        await eventually(lambda: bob.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "idle")
        sent = await bob.post(f"/sessions/{session}/messages", json={"text": "hello there"})
        assert sent.status_code == 200, sent.text
