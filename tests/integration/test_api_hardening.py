"""The API's doors against callers who do not play along: Temporal gone (503, /readyz), the codec
endpoint addressed by another name, from another origin, without its token or flooded, stream
tickets forged, replayed or logged, pages framed, and one person reading or watching too much."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from google.protobuf import json_format

from hitl.devserver import free_port
from hitl.encryption import AesGcmCodec, parse_keys
from tests.support.api_server import Api, EventStream, api, of_type, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent
from tests.support.stack import ROOT, new_key

SECRET = "what only the key holder reads"
CODEC_TOKEN = "codec-token-0123456789"


async def test_readyz_says_whether_temporal_answers_and_every_route_is_503_while_it_does_not(api: Api) -> None:
    async with api.as_(None) as anonymous:
        ready = await anonymous.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["ready"] is True

    nowhere = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True)  # nothing listens there
    async with serving(None, client=nowhere, task_queue="nowhere") as cut_off:
        async with cut_off.as_(None) as anonymous:
            assert (await anonymous.get("/healthz")).status_code == 200  # the process is fine
            not_ready = await anonymous.get("/readyz")
            assert not_ready.status_code == 503, not_ready.text
            assert not_ready.json()["ready"] is False
        async with cut_off.as_("ana") as ana:
            for method, path, body in (("GET", "/inbox", None), ("GET", "/sessions/s1", None),
                                       ("GET", "/sessions/s1/transcript", None), ("GET", "/sessions/s1/audit", None),
                                       ("GET", "/sessions/s1/events", None), ("POST", "/sessions/s1/events/ticket", None),
                                       ("POST", "/sessions", {"message": "hello"}),
                                       ("POST", "/sessions/s1/messages", {"text": "hi"}),
                                       ("POST", "/sessions/s1/cancel", {}),
                                       ("POST", "/sessions/s1/calls/c1/approve", {})):
                answer = await ana.request(method, path, json=body)
                assert answer.status_code == 503, (method, path, answer.text)
                assert "Temporal" in answer.json()["detail"], answer.text
            # AG-UI's run is a stream once it begins: it ends with one RUN_ERROR that says so.
            run = {"threadId": "s1", "runId": "r1", "state": {}, "messages": [{"id": "m1", "role": "user", "content": "hi"}],
                   "tools": [], "context": [], "forwardedProps": {}}
            answer = await ana.post("/ag-ui", json=run)
            errors = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")
                      and json.loads(line[5:])["type"] == "RUN_ERROR"]
            assert [(error["code"], "Temporal" in error["message"]) for error in errors] == [("503", True)], answer.text


# The codec endpoint --------------------------------------------------------------------------


def sealed(codec: AesGcmCodec) -> dict[str, Any]:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(SECRET).encode())
    return {"payloads": [json_format.MessageToDict(codec.encrypt(plain))]}


@pytest.fixture
async def codec_api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Api, AesGcmCodec]]:
    """The API with a real key and no Temporal (the codec endpoint needs none), no codec token."""
    monkeypatch.delenv("HITL_CODEC_TOKEN", raising=False)
    monkeypatch.setenv("HITL_ALLOWED_HOSTS", "proxy.internal")
    codec = AesGcmCodec(parse_keys(new_key()))
    async with serving(None, payload_codec=codec, bind_host="127.0.0.1") as running:
        yield running, codec


async def test_the_codec_endpoint_answers_only_this_machines_names_and_the_ui_origins(codec_api: tuple[Api, AesGcmCodec]) -> None:
    api, codec = codec_api
    body = sealed(codec)
    async with api.as_(None) as http:
        for host in ("127.0.0.1", f"127.0.0.1:{api.base.rsplit(':', 1)[1]}", "localhost:8000", "[::1]:8000", "proxy.internal"):
            answer = await http.post("/codec/decode", json=body, headers={"Host": host})
            assert answer.status_code == 200, (host, answer.text)
            assert json.loads(__import__("base64").b64decode(answer.json()["payloads"][0]["data"])) == SECRET
        for host in ("attacker.example", "attacker.example:8000", "127.0.0.1.attacker.example"):
            rebound = await http.post("/codec/decode", json=body, headers={"Host": host})
            assert rebound.status_code == 403, (host, rebound.text)
            assert SECRET not in rebound.text
            assert (await http.post("/codec/encode", json=body, headers={"Host": host})).status_code == 403
        for origin in ("http://localhost:8233", "http://127.0.0.1:8233", "http://localhost:8080", "http://127.0.0.1:8080"):
            answer = await http.post("/codec/decode", json=body, headers={"Origin": origin})
            assert answer.status_code == 200, (origin, answer.text)
            assert answer.headers["access-control-allow-origin"] == origin
        foreign = await http.post("/codec/decode", json=body, headers={"Origin": "http://attacker.example"})
        assert foreign.status_code == 403, foreign.text
        assert SECRET not in foreign.text


def test_the_api_refuses_to_listen_beyond_loopback_without_a_codec_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    completed = subprocess.run(
        [sys.executable, "starter.py", "serve", "--host", "0.0.0.0", "--port", str(free_port())], cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HITL_ENCRYPTION_KEY": new_key(), "HITL_KEYS_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=60,
    )
    assert completed.returncode != 0
    [line] = [line for line in completed.stderr.splitlines() if line.startswith("error:")]  # one line, no trace
    assert "Traceback" not in completed.stderr
    assert "HITL_CODEC_TOKEN" in line and "beyond loopback" in line, completed.stderr

    from hitl.api.app import StartRefused, refuse_an_open_codec

    for variable, value in (("HITL_CODEC_TOKEN", CODEC_TOKEN), ("HITL_API_LOOPBACK_ONLY", "true")):
        monkeypatch.delenv("HITL_CODEC_TOKEN", raising=False)
        monkeypatch.delenv("HITL_API_LOOPBACK_ONLY", raising=False)
        with pytest.raises(StartRefused):
            refuse_an_open_codec("0.0.0.0")
        monkeypatch.setenv(variable, value)
        refuse_an_open_codec("0.0.0.0")  # a token, or the operator's word that only this machine reaches the port
    refuse_an_open_codec("127.0.0.1")


async def send_headers(port: int, path: str, length: int, token: str | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A POST whose headers promise `length` bytes of body, none of which is sent yet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             f"Content-Length: {length}"] + ([f"Authorization: Bearer {token}"] if token else [])
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    return reader, writer


async def status_of(reader: asyncio.StreamReader) -> int:
    line = await asyncio.wait_for(reader.readline(), 30)  # a server that waits for the body never answers
    return int(line.split()[1])


async def test_forty_large_bodies_without_the_token_are_refused_before_a_byte_of_them_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_CODEC_TOKEN", CODEC_TOKEN)
    async with serving(None, payload_codec=AesGcmCodec(parse_keys(new_key())), bind_host="127.0.0.1") as api:
        port = int(api.base.rsplit(":", 1)[1])
        connections = await asyncio.gather(*(send_headers(port, "/codec/decode", 7_000_000) for _ in range(40)))
        try:
            statuses = await asyncio.gather(*(status_of(reader) for reader, _ in connections))
        finally:
            for _, writer in connections:
                writer.close()
        assert statuses == [401] * 40
        assert api.app.state.codec_door.in_flight == 0


async def test_the_codec_endpoint_takes_a_few_requests_at_once_and_says_so_beyond(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_CODEC_TOKEN", CODEC_TOKEN)
    monkeypatch.setenv("HITL_CODEC_CONCURRENCY", "2")
    codec = AesGcmCodec(parse_keys(new_key()))
    body = json.dumps(sealed(codec)).encode()
    async with serving(None, payload_codec=codec, bind_host="127.0.0.1") as api:
        port = int(api.base.rsplit(":", 1)[1])
        slow = [await send_headers(port, "/codec/decode", len(body), CODEC_TOKEN) for _ in range(2)]
        await eventually(lambda: asyncio.sleep(0, api.app.state.codec_door.in_flight), lambda busy: busy == 2)
        async with api.as_(None, headers={"Authorization": f"Bearer {CODEC_TOKEN}"}) as http:
            busy = await http.post("/codec/decode", content=body, headers={"Content-Type": "application/json"})
            assert busy.status_code == 429, busy.text
            assert "HITL_CODEC_CONCURRENCY" in busy.json()["detail"]
            for reader, writer in slow:
                writer.write(body)
                await writer.drain()
                assert await status_of(reader) == 200
                writer.close()
            await eventually(lambda: asyncio.sleep(0, api.app.state.codec_door.in_flight), lambda busy: busy == 0)
            assert (await http.post("/codec/decode", content=body, headers={"Content-Type": "application/json"})).status_code == 200


# Stream tickets and pages --------------------------------------------------------------------


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_a_stream_ticket_opens_one_stream_once_is_not_logged_and_a_forged_one_is_401(api: Api) -> None:
    session = (await api.start("ana", "hello there"))["session_id"]
    access = logging.getLogger("uvicorn.access")
    captured, level = Captured(), access.level
    access.addHandler(captured)
    access.setLevel(logging.INFO)
    try:
        async with api.as_("ana") as ana:
            ticket = (await ana.post(f"/sessions/{session}/events/ticket")).json()
        async with api.as_(None) as anonymous:
            async with anonymous.stream("GET", ticket["url"]) as stream:
                assert stream.status_code == 200
                await EventStream(stream).read_until(lambda seen: bool(of_type(seen, "answer")))
            again = await anonymous.get(ticket["url"])
            assert again.status_code == 401, again.text
            assert "used" in again.json()["detail"]
            for mac in ("é", "\u2603" * 64, "%FF"):
                forged = await anonymous.get(f"/sessions/{session}/events", params={"ticket": f"YW5h.czE.9999999999.{mac}"})
                assert forged.status_code == 401, (mac, forged.text)
    finally:
        access.removeHandler(captured)
        access.setLevel(level)
    assert any(f"/sessions/{session}/events" in line for line in captured.lines), captured.lines
    assert not [line for line in captured.lines if ticket["ticket"] in line or "ticket=" in line]


async def test_docs_and_the_web_page_may_not_be_framed(api: Api) -> None:
    async with api.as_(None) as anonymous:
        for path in ("/docs", "/", "/healthz"):
            answer = await anonymous.get(path)
            assert answer.status_code == 200, path
            assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], path
            assert answer.headers["x-frame-options"] == "DENY", path


# Reading too much ----------------------------------------------------------------------------


@pytest.fixture
async def limited_api(env: WorkflowEnvironment, workspace: Path, signing_key: str,
                      monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    monkeypatch.setenv("HITL_API_STREAMS_PER_PERSON", "2")
    monkeypatch.setenv("HITL_API_READS_PER_PERSON", "1")
    monkeypatch.setenv("HITL_API_SESSIONS_PER_PERSON", "2")
    async for agent in running_agent(env.client, workspace):
        async with serving(agent) as running:
            yield running


async def test_one_person_has_a_few_streams_and_reads_at_once_and_others_are_not_held_up(limited_api: Api) -> None:
    api = limited_api
    session = (await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]}))["session_id"]
    async with api.as_("ana") as ana, api.as_("bob") as bob:
        first, second = ana.stream("GET", f"/sessions/{session}/events"), ana.stream("GET", f"/sessions/{session}/events")
        try:
            assert (await first.__aenter__()).status_code == 200
            try:
                assert (await second.__aenter__()).status_code == 200
                async with ana.stream("GET", f"/sessions/{session}/events") as third:
                    assert third.status_code == 429
                    assert "HITL_API_STREAMS_PER_PERSON" in json.loads(await third.aread())["detail"]
                async with bob.stream("GET", f"/sessions/{session}/events") as bobs:
                    assert bobs.status_code == 200  # the limit is ana's, not the session's
            finally:
                await second.__aexit__(None, None, None)
            # Once the server has seen one close, ana may open another.
            held = api.app.state.streams.key("ana")
            await eventually(lambda: asyncio.sleep(0, api.app.state.api_state.held(held)), lambda count: count == 1)
            async with ana.stream("GET", f"/sessions/{session}/events") as again:
                assert again.status_code == 200
        finally:
            await first.__aexit__(None, None, None)

        # Given a read of ana's in flight (her one slot held), her next read waits for it; bob's does not.
        give_back = await api.app.state.reads.take("ana")
        busy = await ana.get(f"/sessions/{session}/transcript")
        assert busy.status_code == 429, busy.text
        assert "HITL_API_READS_PER_PERSON" in busy.json()["detail"]
        assert (await bob.get(f"/sessions/{session}/transcript")).status_code == 200
        await give_back()
        assert (await ana.get(f"/sessions/{session}/transcript")).status_code == 200


async def test_one_person_owns_a_few_running_sessions_and_starting_more_at_once_does_not_slip_past(limited_api: Api) -> None:
    api = limited_api
    async with api.as_("ana") as ana, api.as_("bob") as bob:
        # Five starts at once, with a limit of two: the count cannot lag behind them.
        starts = await asyncio.gather(*(ana.post("/sessions", json={"message": "hello there"}) for _ in range(5)))
        assert sorted(answer.status_code for answer in starts) == [201, 201, 429, 429, 429], [a.text for a in starts]
        refused = next(answer for answer in starts if answer.status_code == 429)
        assert "owns 2 running sessions" in refused.json()["detail"]
        assert "HITL_API_SESSIONS_PER_PERSON" in refused.json()["detail"]
        assert (await bob.post("/sessions", json={"message": "hello there"})).status_code == 201  # ana's limit, not bob's

        # Once she cancels one, she may start another (when Temporal has it closed).
        first = next(answer for answer in starts if answer.status_code == 201).json()["session_id"]
        assert (await ana.post(f"/sessions/{first}/cancel", json={})).status_code == 200
        again = await eventually(lambda: ana.post("/sessions", json={"message": "hello there"}),
                                 lambda answer: answer.status_code != 429)
        assert again.status_code == 201, again.text
        assert (await ana.post("/sessions", json={"message": "hello there"})).status_code == 429


async def test_a_closed_session_is_read_once_and_then_without_the_worker(env: WorkflowEnvironment, workspace: Path,
                                                                          signing_key: str) -> None:
    """A closed run never changes: its reads are kept, so they need no worker to replay it again."""
    worker = running_agent(env.client, workspace)
    agent = await worker.__anext__()
    async with serving(agent) as api:
        started = await api.start("ana", "please delete notes.txt")
        session = started["session_id"]
        async with api.as_("ana") as ana:
            assert (await ana.post(f"/sessions/{session}/cancel", json={"reason": "done"})).status_code == 200
            await eventually(lambda: ana.get(f"/sessions/{session}"), lambda answer: answer.json()["state"] == "closed")
            await agent.client.get_workflow_handle(session).result()  # the run has ended, not only its turn
            first = {read: (await ana.get(f"/sessions/{session}{read}")).json() for read in ("", "/pending", "/transcript", "/audit")}
        await worker.aclose()  # no worker polls the task queue any more: a query would wait for ever
        async with api.as_("ana") as ana:
            ana.timeout = httpx.Timeout(15)
            for read, answer in first.items():
                again = await ana.get(f"/sessions/{session}{read}")
                assert again.status_code == 200, (read, again.text)
                assert again.json() == answer
        async with api.as_("dave") as dave:  # kept answers are still behind the access table
            assert (await dave.get(f"/sessions/{session}/transcript")).status_code == 404
