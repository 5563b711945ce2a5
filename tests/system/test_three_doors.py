"""One session, three pauses, three doors: an AG-UI client (the official @ag-ui/client) starts it
and answers its question, an A2A client (a2a-sdk) approves the booking that follows, and the real
`temporal` CLI approves the deletion after it; each sees the pause it decides, and the audit names
each door: `ag-ui`, `a2a`, and `temporal` for the decision that came straight through Temporal."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts, new_text_part
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a_client import a2a_as
from tests.support.ag_ui_client import drive, step
from tests.support.api_server import Api, api, new_id, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually
from tests.support.stack import temporal_cli

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


async def temporal(api: Api, *args: str) -> Any:
    """The `temporal` CLI as a person at a terminal would run it, its JSON output read."""
    completed = await asyncio.to_thread(temporal_cli, *args, "--output", "json",
                                        TEMPORAL_ADDRESS=api.agent.client.service_client.config.target_host)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


async def test_one_session_is_decided_through_ag_ui_a2a_and_the_temporal_cli_and_the_audit_names_each(api: Api) -> None:
    session = new_id()
    # Asserted, not verified: a decision from the `temporal` CLI carries no proof the API signed.
    asserted = {"session": {"verified_decisions": False}}
    asked, answered = await drive(
        api, session, step("ana", message="please book a flight to Paris from Berlin", forwardedProps=asserted),
        step("ana", resume={"status": "resolved", "payload": {"decision": "answer", "answer": {"date": "2026-12-24"}}}),
    )
    [question] = asked.interrupts
    assert question["reason"] == "input_required", question
    [booking] = answered.interrupts
    assert booking["metadata"]["hitl"]["tool"] == "book_flight"

    async with a2a_as(api, "ana") as ana:
        task = await ana.get(session)  # the AG-UI thread is this task
        assert task.status.state == INPUT_REQUIRED
        [card] = get_data_parts(task.status.message.parts)
        assert (card["call_id"], card["tool"]) == (booking["id"], "book_flight")
        booked = await ana.decide(task, call_id=card["call_id"], decision="approve")
        assert booked.status.state == TaskState.TASK_STATE_COMPLETED, booked.status
        deleting = await ana.send(new_text_part("please delete notes.txt"), task_id=session)
        assert deleting.status.state == INPUT_REQUIRED

    async def pending() -> list[dict[str, Any]]:
        return (await temporal(api, "workflow", "query", "--workflow-id", session, "--name", "pending"))["queryResult"][0]

    [deletion] = await eventually(pending, lambda items: len(items) == 1)
    assert (deletion["tool"], deletion["args"]) == ("delete_file", {"path": "notes.txt"})
    decided = await temporal(api, "workflow", "update", "execute", "--workflow-id", session, "--name", "approve_update",
                             "--input", json.dumps({"call_id": deletion["call_id"], "by": "ana"}))
    assert decided["result"]["outcome"] == "approved", decided

    [after] = await drive(api, session, step("ana"))  # the AG-UI client sees it decided
    assert after.interrupts == [] and after.of_type("RUN_FINISHED")[0]["result"]["state"] == "idle", after.events
    assert not (api.agent.workspace / "notes.txt").exists()
    async with api.as_("ana") as http:
        audit = (await http.get(f"/sessions/{session}/audit")).json()
    assert [(event["event"], event["call_id"], event["by"], event["via"]) for event in audit
            if event["event"] != "requested"] == [
        ("answered", question["id"], "ana", "ag-ui"),
        ("approved", booking["id"], "ana", "a2a"),
        ("approved", deletion["call_id"], "ana", "temporal"),
    ]
