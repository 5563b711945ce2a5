"""GET /sessions/{id} and /pending declare their answers (SessionStatus, PendingItem in
workflows/contract.py), so /docs shows their schemas; what goes over the wire is what it was
before they were typed: the query's answer, key for key and in its order (the pending items with
what approving does and what the deadline does, hitl/client/consequences.py)."""

from __future__ import annotations

from typing import Any

from hitl.client.consequences import with_consequences
from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import query
from workflows.contract import SessionStatus


def answer_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    schema: dict[str, Any] = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return schema


async def test_a_paused_sessions_status_and_pending_read_over_http_as_the_queries_answer(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]}, participants=["bob"])
    session = started["session_id"]
    handle = api.agent.client.get_workflow_handle(session)
    queried_status, queried_pending = await query(handle, "status"), await query(handle, "pending")
    async with api.as_("bob") as http:
        status = (await http.get(f"/sessions/{session}")).json()
        pending = (await http.get(f"/sessions/{session}/pending")).json()
    assert status == queried_status and list(status) == list(queried_status) == list(SessionStatus.model_fields)
    assert status["state"] == "awaiting_human" and status["last_answer"] is None  # nulls stay
    expected = [with_consequences(item) for item in queried_pending]
    assert pending == expected and [list(item) for item in pending] == [list(item) for item in expected]
    [item] = pending
    assert item["approvers"] == ["bob"] and "approving" in item and "input_schema" not in item
    assert None not in item.values()  # unset fields are left out, as the query leaves them


async def test_the_openapi_document_declares_what_status_and_pending_answer(api: Api) -> None:
    document = api.app.openapi()
    assert answer_schema(document, "/sessions/{session_id}") == {"$ref": "#/components/schemas/SessionStatus"}
    assert answer_schema(document, "/sessions/{session_id}/pending")["items"] == {"$ref": "#/components/schemas/PendingItem"}
    pending_item = document["components"]["schemas"]["PendingItem"]["properties"]
    assert {"call_id", "tool", "args", "deadline", "approving", "at_deadline"} <= set(pending_item)
    assert "input_schema" not in pending_item
    assert set(document["components"]["schemas"]["SessionStatus"]["required"]) == set(SessionStatus.model_fields)
