"""A client without the key, in a namespace where a worker encrypts (issue 26): `starter.py inbox`
died with a 40-line `KeyError: 'Unknown payload encoding binary/encrypted'`, so one encrypted
session hid every other session's calls from everyone without the key. The inbox lists what it
can read and says in one line what it could not and which key it needs; a read of an encrypted
session says what is missing."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest

from activities.offline_model import OfflineModel
from hitl.encryption import derived_key_id
from hitl.worker import build_worker
from tests.support.sessions import pending_items
from tests.support.stack import DevServer, new_key, private_dev_server, run_starter
from tests.system.test_encryption import client_with
from workflows.agent import AgentWorkflow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A server of this module's own: the inbox below counts every waiting session in it."""
    with private_dev_server(tmp_path_factory.mktemp("mixed-namespace")) as running:
        yield running


@pytest.fixture
async def one_of_each(server: DevServer, workspace: Path) -> AsyncIterator[tuple[str, str]]:
    """Two sessions started without a key, each waiting for an approval: one on a worker that
    encrypts (its memo, its answers), one on a worker that does not. Yields the key and the
    encrypting worker's session."""
    key = new_key()
    sealed_client, plain_client = await client_with(server, key), await client_with(server, None)
    async with build_worker(sealed_client, "sealed", OfflineModel(), workspace), \
            build_worker(plain_client, "plain", OfflineModel(), workspace):
        started = {}
        for queue in ("sealed", "plain"):
            started[queue] = await plain_client.start_workflow(
                AgentWorkflow.run, {"message": "please delete notes.txt"}, id=f"{queue}-{uuid.uuid4().hex[:6]}",
                task_queue=queue)
        await pending_items(sealed_client.get_workflow_handle(started["sealed"].id))
        await pending_items(started["plain"])
        yield key, started["sealed"].id


async def test_without_the_key_the_inbox_lists_what_it_can_read_and_names_the_key_it_lacks(
    server: DevServer, one_of_each: tuple[str, str]
) -> None:
    key, _ = one_of_each
    key_id = derived_key_id(base64.b64decode(key))
    listed = await run_starter("inbox", TEMPORAL_ADDRESS=server.address)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    rows = listed.stdout.strip().splitlines()
    assert rows[0].split()[:3] == ["WAITING", "SESSION", "CALL"] and len(rows) == 2, listed.stdout
    assert " plain-" in rows[1] and 'delete_file(path="notes.txt")' in rows[1]
    [line] = listed.stderr.strip().splitlines()
    assert line.startswith("1 waiting session could not be read: ") and repr(key_id) in line, line
    assert "HITL_ENCRYPTION_KEY" in line

    other_key = await run_starter("inbox", TEMPORAL_ADDRESS=server.address, HITL_ENCRYPTION_KEY=new_key())
    assert len(other_key.stdout.strip().splitlines()) == 2 and repr(key_id) in other_key.stderr, other_key

    with_key = await run_starter("inbox", TEMPORAL_ADDRESS=server.address, HITL_ENCRYPTION_KEY=key)
    assert len(with_key.stdout.strip().splitlines()) == 3 and with_key.stderr == "", with_key


async def test_reading_a_session_the_worker_encrypts_without_the_key_says_what_is_missing(
    server: DevServer, one_of_each: tuple[str, str]
) -> None:
    _, started_plainly = one_of_each
    read = await run_starter("pending", started_plainly, TEMPORAL_ADDRESS=server.address)
    [line] = read.stderr.strip().splitlines()
    assert read.returncode == 1 and read.stdout == "", read
    assert line.startswith("error: ") and "encrypted" in line and "HITL_ENCRYPTION_KEY" in line, line
