"""HITL_ENCRYPTION_KEY: what people type never reaches Temporal's database in
the clear; key holders read it through the codec endpoint; keys rotate."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter

from activities.offline_model import OfflineModel
from workflows.limits import UNREADABLE_ENCODING, UNREADABLE_REASON
from hitl.encryption import ENCODING, KEY_ID_METADATA, AesGcmCodec, EncryptionKeyError, derived_key_id, parse_keys
from hitl.settings import data_converter
from tests.support.sessions import eventually, pending_items, settled
from tests.support.stack import (
    ROOT, DevServer, api_server, new_key, nobody_listens, private_dev_server, product_env, run_starter, temporal_cli,
)
from hitl.worker import build_worker
from workflows.agent import AgentWorkflow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with private_dev_server(tmp_path_factory.mktemp("encrypted-server")) as running:
        yield running


async def client_with(server: DevServer, key: str | None) -> Client:
    return await Client.connect(server.address, data_converter=data_converter(key))


@pytest.fixture
async def encrypted(server: DevServer, workspace: Path) -> AsyncIterator[tuple[Client, str, str]]:
    """An encrypting client and a worker on its own task queue; yields (client, task queue, key)."""
    key = new_key()
    client = await client_with(server, key)
    task_queue = f"encrypted-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, task_queue, OfflineModel(), workspace):
        yield client, task_queue, key


def payloads_in(message: Any) -> list[Payload]:
    """Every Payload inside a history event, however deeply nested (maps and lists included)."""
    if isinstance(message, Payload):
        return [message]
    found: list[Payload] = []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif field.is_repeated:
            items = list(value)
        else:
            items = [value]
        for item in items:
            if hasattr(item, "ListFields"):
                found.extend(payloads_in(item))
    return found


async def test_a_marker_typed_in_a_message_never_reaches_the_servers_database(
    server: DevServer, encrypted: tuple[Client, str, str], tmp_path: Path
) -> None:
    client, task_queue, key = encrypted
    secret, in_the_clear = f"zebra-{uuid.uuid4().hex[:10]}", f"okapi-{uuid.uuid4().hex[:10]}"

    session = await client.start_workflow(
        AgentWorkflow.run, {"message": f"please search for {secret}", "by": "ana"},
        id=f"secret-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
    )
    status = await settled(session)
    assert secret in json.dumps(await session.query("transcript")), "the key holder reads the conversation"
    # A call waiting for a person puts its arguments in the memo inboxes list: encrypted too.
    waiting = await client.start_workflow(
        AgentWorkflow.run, {"message": f"please delete {secret}.txt"}, id=f"waiting-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )
    [item] = await pending_items(waiting)
    memo = await eventually(lambda: waiting.describe(), lambda d: bool(d.raw_description.workflow_execution_info.memo.fields))
    assert (await memo.memo())["hitl_pending"][0]["args"] == item["args"] == {"path": f"{secret}.txt"}

    # The same worker serves a session started by a client without the key: its
    # first message is stored as sent, which shows the scan below sees what is written.
    plain = await client_with(server, None)
    control = await plain.start_workflow(
        AgentWorkflow.run, {"message": f"please search for {in_the_clear}"}, id=f"plain-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )
    await settled(client.get_workflow_handle(control.id))  # its answers come back encrypted

    stored = server.stored_bytes()
    assert in_the_clear.encode() in stored
    assert secret.encode() not in stored, "the marker is in the server's database in the clear"
    assert status["state"] == "idle"

    # The `temporal` CLI shows ciphertext, unless it goes through the codec endpoint with the token.
    show = ["workflow", "show", "--workflow-id", session.id, "--address", server.address, "--detailed"]
    without_codec = temporal_cli(*show)
    assert without_codec.returncode == 0, without_codec.stderr
    assert secret not in without_codec.stdout
    assert base64.b64encode(b"binary/encrypted").decode() in without_codec.stdout, "it shows the ciphertext's encoding"
    with api_server(tmp_path / "api.log", HITL_ENCRYPTION_KEY=key, HITL_CODEC_TOKEN="codec-token") as api:
        with_codec = temporal_cli(*show, "--codec-endpoint", f"{api}/codec", "--codec-auth", "Bearer codec-token")
        assert with_codec.returncode == 0, with_codec.stderr
        assert secret in with_codec.stdout

        refused = post_json(f"{api}/codec/decode", {"payloads": []})
        assert refused == 401, "the codec endpoint refuses a caller without the token"

        # The Temporal UI calls it from the browser: encode and decode round-trip, and its origin may call.
        token = {"Authorization": "Bearer codec-token"}
        plain_payload = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                         "data": base64.b64encode(f'"{secret}"'.encode()).decode()}
        sealed = post_json(f"{api}/codec/encode", {"payloads": [plain_payload]}, token)
        assert secret not in json.dumps(sealed)
        assert post_json(f"{api}/codec/decode", sealed, token) == {"payloads": [plain_payload]}
        preflight = urllib.request.Request(f"{api}/codec/decode", method="OPTIONS", headers={
            "Origin": "http://localhost:8233", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-namespace"})
        with urllib.request.urlopen(preflight, timeout=10) as answer:
            assert answer.headers["Access-Control-Allow-Origin"] == "http://localhost:8233"


def post_json(url: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code


async def test_a_worker_with_the_rotated_key_list_continues_a_session_written_with_the_old_key(
    server: DevServer, workspace: Path
) -> None:
    old, new = new_key(), f"k2026:{new_key()}"
    task_queue = f"rotation-{uuid.uuid4().hex[:8]}"
    before = await client_with(server, old)
    async with build_worker(before, task_queue, OfflineModel(), workspace):
        session = await before.start_workflow(
            AgentWorkflow.run, {"message": "please delete notes.txt"}, id=task_queue, task_queue=task_queue
        )
        await pending_items(session)

    # The deploy after the rotation: a fresh worker (nothing cached, so it
    # replays the whole history) and clients with "new,old".
    after = await client_with(server, f"{new},{old}")
    async with build_worker(after, task_queue, OfflineModel(), workspace):
        rotated = after.get_workflow_handle(session.id)
        await rotated.signal("approve", {"by": "ana"})
        status = await settled(rotated)
    assert not (workspace / "notes.txt").exists()
    assert "notes.txt" in status["last_answer"]

    history = await (await client_with(server, None)).get_workflow_handle(session.id).fetch_history()
    key_ids = [{p.metadata[KEY_ID_METADATA].decode() for p in payloads_in(event) if p.metadata.get("encoding") == ENCODING}
               for event in history.events]
    rotation = next(n for n, event in enumerate(history.events)
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    old_id = derived_key_id(parse_keys(old)[0].secret)
    assert set().union(*key_ids[:rotation]) == {old_id}, "the session began under the old key"
    assert set().union(*key_ids[rotation:]) == {"k2026"}, "what was written after the rotation uses the new key"
    # Plain by design: the SDK's patch markers and the search attributes an operator queries.
    plain = {event.event_type for event in history.events
             if any(p.metadata.get("encoding") != ENCODING for p in payloads_in(event))}
    assert plain <= {EventType.EVENT_TYPE_MARKER_RECORDED, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES}


async def test_keys_round_trip_rotate_and_refuse_what_they_cannot_read() -> None:
    old, new = parse_keys(new_key())[0], parse_keys(f"next:{new_key()}")[0]
    original = Payload(metadata={"encoding": b"json/plain"}, data=b'{"text": "call me at 555-0101"}')

    [sealed] = await AesGcmCodec([old]).encode([original])
    assert b"555-0101" not in sealed.SerializeToString()
    assert await AesGcmCodec([new, old]).decode([sealed]) == [original]
    [resealed] = await AesGcmCodec([new, old]).encode([original])
    assert resealed.metadata[KEY_ID_METADATA] == b"next"

    # What a codec cannot open it hands on unreadable, with why, for the session to refuse: raising
    # would fail the workflow task that holds it on every retry (tests/integration/test_sealed_signals.py).
    [unknown_key] = await AesGcmCodec([new]).decode([sealed])
    assert unknown_key.metadata["encoding"] == UNREADABLE_ENCODING and not unknown_key.data
    assert b"not in HITL_ENCRYPTION_KEY" in unknown_key.metadata[UNREADABLE_REASON]
    relabelled = Payload(metadata={**sealed.metadata, KEY_ID_METADATA: b"next"}, data=sealed.data)
    [altered] = await AesGcmCodec([old, parse_keys(f"next:{new_key()}")[0]]).decode([relabelled])
    assert b"fails authentication" in altered.metadata[UNREADABLE_REASON]
    # Payloads written before encryption was turned on stay readable.
    assert await AesGcmCodec([old]).decode([original]) == [original]


@pytest.mark.parametrize("setting, reason", [
    ("not-base64!", "entry 1 is not"),
    ("c2hvcnQ=", "decoded to 5 bytes"),
    (" , ", "holds no key"),
    ("a:{key},a:{key}", "names key id 'a' twice"),
])
def test_a_malformed_key_is_refused_with_the_reason(setting: str, reason: str) -> None:
    with pytest.raises(EncryptionKeyError, match=reason):
        parse_keys(setting.format(key=new_key()))


def test_the_worker_stops_at_start_on_a_malformed_key_and_says_why() -> None:
    started = subprocess.run(
        [sys.executable, "worker.py"], cwd=ROOT, env=product_env(HITL_ENCRYPTION_KEY="abc:tooshort", TEMPORAL_ADDRESS=nobody_listens()),
        capture_output=True, text=True, timeout=60,
    )
    assert started.returncode != 0
    assert "HITL_ENCRYPTION_KEY entry 1 is not [keyid:]base64 of 32 bytes" in started.stderr


def test_without_a_key_nothing_changes() -> None:
    for plain in (data_converter(None), data_converter("")):
        assert plain.payload_codec is None
        # the SDK's failure converter, reading details it cannot decode as raw (hitl/failure_converter.py)
        assert issubclass(plain.failure_converter_class, pydantic_data_converter.failure_converter_class)
        assert not plain.failure_converter_class()._encode_common_attributes
        # pydantic's converter, one instance for the process (hitl/payload_converter.py)
        assert issubclass(plain.payload_converter_class, PydanticPayloadConverter)
        assert plain.payload_converter_class() is plain.payload_converter_class()


def test_the_shared_payload_converter_round_trips_pydantic_models() -> None:
    from workflows.conversation import ModelReply

    converter = data_converter(None).payload_converter
    reply = ModelReply(content="hello")
    [payload] = converter.to_payloads([reply])
    assert converter.from_payloads([payload], [ModelReply]) == [reply]


async def test_the_temporal_ui_summary_says_what_a_session_is_without_its_content(server: DevServer) -> None:
    """starter.py's workflow summary is plain on purpose (readable without the key), so it carries no content."""
    secret = f"gnu-{uuid.uuid4().hex[:10]}"
    connection = {"TEMPORAL_ADDRESS": server.address, "HITL_TASK_QUEUE": "nobody-serves-this"}
    encrypted = await run_starter("start", f"please email {secret}@example.com", "--session", f"summary-{secret[4:]}",
                                  "--by", "ana", HITL_ENCRYPTION_KEY=new_key(), **connection)
    plain = await run_starter("start", "please delete notes.txt", "--session", f"plain-{secret[4:]}", **connection)
    assert encrypted.returncode == plain.returncode == 0, encrypted.stderr + plain.stderr

    def metadata(session: str) -> dict[str, str]:
        described = temporal_cli("workflow", "describe", "--workflow-id", session, "--address", server.address,
                                 "--output", "json")
        assert described.returncode == 0, described.stderr
        return json.loads(described.stdout)["executionConfig"]["userMetadata"]

    summary = metadata(f"summary-{secret[4:]}")
    assert summary["summary"] == "Agent session by ana; conversation encrypted"
    assert f"summary-{secret[4:]}" in summary["details"] and "pending" in summary["details"]
    assert secret not in json.dumps(summary) and secret.encode() not in server.stored_bytes()
    assert metadata(f"plain-{secret[4:]}")["summary"] == "Agent session: please delete notes.txt"
