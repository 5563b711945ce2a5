"""A memo is written by whoever starts a workflow: one the API cannot read is no memo, never a 500
for every person listing or starting sessions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

from hitl.api.inbox import memo_of
from hitl.client.inbox import UnreadableMemo, items_of

UNREADABLE = [
    Payload(metadata={"encoding": b"json/protobuf", "messageType": b"no.such.Message"}, data=b"{}"),
    Payload(metadata={"encoding": b"binary/protobuf", "messageType": b"garbage"}, data=b"\xff\x00"),
    Payload(metadata={"encoding": b"json/plain"}, data=b"{not json"),
    Payload(metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"elsewhere"}, data=b"\x00" * 40),
    Payload(metadata={"encoding": b"no-such-encoding"}, data=b"x"),
]


@pytest.mark.parametrize("payload", UNREADABLE, ids=lambda payload: payload.metadata["encoding"].decode())
async def test_a_memo_the_api_cannot_read_is_no_memo(payload: Payload) -> None:
    client = SimpleNamespace(data_converter=DataConverter.default)
    assert await memo_of(client, payload) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("payload", UNREADABLE[:3], ids=lambda payload: payload.metadata["encoding"].decode())
async def test_pending_items_the_inbox_cannot_read_are_named_unreadable(payload: Payload) -> None:
    client = SimpleNamespace(data_converter=DataConverter.default)
    with pytest.raises(UnreadableMemo):
        await items_of(client, "s1", payload)  # type: ignore[arg-type]
