"""Server-sent events: resumable with Last-Event-ID, one watcher per session however many listen,
a resync when the caller asks for events the session no longer keeps, tickets for EventSource."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from hitl.api.events import Feed, Feeds
from tests.support.api_server import Api, EventStream, api, of_type, read_until, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.sessions import eventually


async def test_a_client_that_reconnects_with_last_event_id_misses_nothing_and_gets_nothing_twice(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("ana") as ana:
        async with ana.stream("GET", f"/sessions/{session}/events") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            first = await read_until(stream, lambda seen: bool(of_type(seen, "pause_opened")))
        ids = [int(event["id"]) for event in first]
        assert ids == list(range(1, len(ids) + 1)), first
        assert of_type(first, "pause_opened")[0]["data"]["data"]["call_id"] == call
        last = ids[-1]

        # While nobody listens, the call is decided and the turn ends.
        decided = await ana.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert decided.status_code == 200, decided.text

        async with ana.stream("GET", f"/sessions/{session}/events", headers={"Last-Event-ID": str(last)}) as stream:
            rest = await read_until(stream, lambda seen: bool(of_type(seen, "answer")))
    rest_ids = [int(event["id"]) for event in rest]
    assert rest_ids == list(range(last + 1, last + 1 + len(rest_ids))), rest
    settled = of_type(rest, "pause_settled")[0]["data"]["data"]
    assert (settled["call_id"], settled["outcome"], settled["by"]) == (call, "approved", "ana")
    assert "notes.txt" in of_type(rest, "tool_result")[0]["data"]["data"]["content"]


async def test_many_listeners_share_one_watcher_and_all_see_each_live_event(api: Api) -> None:
    started = await api.start("ana", "hello there")
    session = started["session_id"]
    feeds = api.app.state.feeds
    clients = [api.as_("ana") for _ in range(3)]  # three pages of the owner's
    streams = [client.stream("GET", f"/sessions/{session}/events") for client in clients]
    try:
        opened = [EventStream(await stream.__aenter__()) for stream in streams]
        backlog = [await s.read_until(lambda seen: bool(of_type(seen, "answer"))) for s in opened]
        last = int(backlog[0][-1]["id"])
        assert feeds.watched() == {session: 3}
        assert len(feeds.feeds) == 1

        async with api.as_("ana") as ana:
            sent = await ana.post(f"/sessions/{session}/messages", json={"text": "please delete notes.txt"})
            assert sent.status_code == 200, sent.text
        live = await asyncio.gather(*(s.read_until(lambda seen: bool(of_type(seen, "pause_opened"))) for s in opened))
        for events in live:
            assert int(events[0]["id"]) == last + 1
            assert [e["id"] for e in events] == [e["id"] for e in live[0]]
            assert of_type(events, "message")[0]["data"]["data"]["by"] == "ana"
    finally:
        for stream in streams:
            await stream.__aexit__(None, None, None)
        for client in clients:
            await client.aclose()
    # The server notices the disconnections, in its own time.
    await eventually(lambda: asyncio.sleep(0, feeds.watched()), lambda watched: watched == {})


async def test_a_client_back_after_more_events_than_the_session_keeps_gets_a_resync_first(api: Api) -> None:
    started = await api.start("ana", "hello there")
    session = started["session_id"]
    handle = api.agent.client.get_workflow_handle(session)
    # 520 forged decisions, each refused and logged as an event: more than the newest 500 the session keeps.
    await asyncio.gather(*(handle.signal("reject", {"reason": f"forged {n}", "by": "bob"}) for n in range(520)))
    kept = await eventually(lambda: handle.query("events", {"after": 0, "limit": 1}), lambda answer: answer["last"] > 520)
    assert kept["oldest"] > 3
    async with api.as_("ana") as ana:
        async with ana.stream("GET", f"/sessions/{session}/events", headers={"Last-Event-ID": "2"}) as stream:
            gap, first_kept = await read_until(stream, lambda seen: len(seen) == 2)
        async with ana.stream("GET", f"/sessions/{session}/events?last_event_id=100000") as stream:
            [ahead] = await read_until(stream, lambda seen: len(seen) == 1)
    assert gap["event"] == "resync" and "id" not in gap  # the client's own Last-Event-ID stays where its events stop
    assert gap["data"]["data"]["after"] == 2 and gap["data"]["data"]["oldest"] == kept["oldest"]
    assert int(first_kept["id"]) == kept["oldest"] and first_kept["event"] == "refused"
    assert ahead["event"] == "resync"  # ids behind the client's: the session was reset or replaced


async def test_eventsource_clients_use_a_short_lived_ticket_for_one_session_never_the_token(api: Api) -> None:
    one = (await api.start("ana", "hello there"))["session_id"]
    other = (await api.start("ana", "hello again"))["session_id"]
    async with api.as_("ana") as ana:
        issued = await ana.post(f"/sessions/{one}/events/ticket")
        assert issued.status_code == 200, issued.text
        ticket = issued.json()
        assert ticket["expires_in"] <= 60 and token_of("ana") not in ticket["url"]
    async with api.as_(None) as anonymous:
        async with anonymous.stream("GET", ticket["url"]) as stream:
            assert stream.status_code == 200
            await read_until(stream, lambda seen: bool(of_type(seen, "answer")))
        for url in (f"/sessions/{other}/events?ticket={ticket['ticket']}",
                    f"/sessions/{one}/events?ticket={ticket['ticket']}x",
                    f"/sessions/{one}/events?ticket={token_of('ana')}"):
            answer = await anonymous.get(url)
            assert answer.status_code == 401, (url, answer.text)
        assert (await anonymous.post(f"/sessions/{one}/events/ticket")).status_code == 401
    async with api.as_("ana") as ana:
        assert (await ana.get("/sessions/no-such-session/events")).status_code == 404


async def test_a_decision_through_the_api_reaches_its_stream_at_once_however_quiet_the_session_was(api: Api) -> None:
    # Feeds that, left alone, would read the session's log once an hour: only the decision's own
    # nudge can bring its settlement to the stream within the read's bound.
    api.app.state.feeds = Feeds(fastest=3600, slowest=3600)
    started = await api.start("ana", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("ana") as ana, ana.stream("GET", f"/sessions/{session}/events") as response:
        stream = EventStream(response)
        await stream.read_until(lambda seen: bool(of_type(seen, "pause_opened")))  # the backlog
        decided = await ana.post(f"/sessions/{session}/calls/{call}/approve", json={})
        assert decided.status_code == 200, decided.text
        live = await stream.read_until(lambda seen: bool(of_type(seen, "pause_settled")))
    assert of_type(live, "pause_settled")[0]["data"]["data"]["call_id"] == call


def test_a_childs_decision_wakes_the_feeds_of_its_root_and_of_itself_and_no_other() -> None:
    feeds = Feeds()
    for session_id in ("root", "root/janitor/1", "root/janitor/1/helper/1", "rooted", "other"):
        feeds.feeds[session_id] = Feed(cast(Any, None), session_id)  # never started: only their wake is read
    feeds.nudge("root/janitor/1")
    assert {session_id for session_id, feed in feeds.feeds.items() if feed.wake.is_set()} == {"root", "root/janitor/1"}
