"""The API's reads declare their answers (SessionStatus, PendingItem in workflows/contract.py; the
201 of POST /sessions, Started; GET /inbox, InboxItem; the audit, AuditEvent), so /docs shows their
schemas; what goes over the wire is what it was before they were typed: the query's answer, key for
key and in its order (the pending items with what approving does and what the deadline does,
hitl/client/consequences.py), and the inbox row with the keys it always had."""

from __future__ import annotations

from typing import Any

from hitl.client.consequences import with_consequences
from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, query
from workflows.contract import SessionStatus
from workflows.session import AuditEvent


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


# What an inbox row carried before InboxItem derived from PendingItem: the same keys now.
INBOX_ROW_KEYS = {
    "session_id", "call_id", "kind", "tool", "args", "args_truncated", "args_sha256", "requested_at", "age_seconds",
    "requested_by", "approvers", "required_approvals", "approvals", "four_eyes", "claimed_by", "claim_until", "question",
    "choices", "fields", "result", "deadline", "verified", "led_by", "model_text", "description", "because",
    "destructive", "remember_allowed",
    "server", "url", "domain",  # since: an MCP server's question (which server asks, its link)
    "stood_in", "for",  # since: stand-ins (who voted for whom; whose call a stand-in may decide)
}


async def test_the_start_the_inbox_and_the_audit_read_over_http_as_they_did_untyped(api: Api) -> None:
    """The 201 of POST /sessions is the session's status and pending items as the queries answer them;
    bob's inbox row is the pending item as the memo keeps it (no clocks), with nulls for what it lacks;
    the audit is the `audit` query's answer, key for key, nulls kept."""
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]}, participants=["bob"])
    session = started["session_id"]
    handle = api.agent.client.get_workflow_handle(session)
    queried_pending = await query(handle, "pending")
    assert list(started) == ["session_id", "status", "pending"]
    assert started["status"] == await query(handle, "status") and list(started["status"]) == list(SessionStatus.model_fields)
    assert started["pending"] == queried_pending and [list(item) for item in started["pending"]] == [list(item) for item in queried_pending]

    [row] = await eventually(lambda: inbox_of(api, "bob"), lambda rows: session in {row["session_id"] for row in rows})
    [item] = queried_pending
    assert set(row) == INBOX_ROW_KEYS
    kept = {key: value for key, value in item.items() if key not in ("remind_at", "escalate_at")}
    assert row == {**dict.fromkeys(INBOX_ROW_KEYS), **kept, "session_id": session, "args_truncated": False,
                   "age_seconds": row["age_seconds"]}
    assert row["verified"] is True and row["age_seconds"] >= 0

    async with api.as_("bob") as http:
        assert (await http.post(f"/sessions/{session}/calls/{item['call_id']}/approve", json={})).status_code == 200
        await eventually(lambda: query(handle, "audit"), lambda events: [e["event"] for e in events] == ["requested", "approved"])
        audit = (await http.get(f"/sessions/{session}/audit")).json()
    queried_audit = await query(handle, "audit")
    assert audit == queried_audit and [list(event) for event in audit] == [list(event) for event in queried_audit]
    assert audit[1]["by"] == "bob" and audit[1]["reason"] is None  # nulls stay


async def inbox_of(api: Api, person: str) -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get("/inbox")
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()
    return rows


async def test_the_openapi_document_declares_the_start_the_inbox_and_the_audit(api: Api) -> None:
    document = api.app.openapi()
    schemas = document["components"]["schemas"]
    created = document["paths"]["/sessions"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert created == {"$ref": "#/components/schemas/Started"}
    assert schemas["Started"]["properties"]["status"] == {"$ref": "#/components/schemas/SessionStatus"}
    assert schemas["Started"]["properties"]["pending"]["items"] == {"$ref": "#/components/schemas/PendingItem"}
    assert answer_schema(document, "/inbox")["items"] == {"$ref": "#/components/schemas/InboxItem"}
    assert set(schemas["InboxItem"]["properties"]) == INBOX_ROW_KEYS
    audit = answer_schema(document, "/sessions/{session_id}/audit")["items"]["anyOf"]
    assert audit == [{"$ref": "#/components/schemas/AuditEvent"}, {"$ref": "#/components/schemas/MissingItems"}]
    wire_names = {field.alias or name for name, field in AuditEvent.model_fields.items()}
    assert set(schemas["AuditEvent"]["properties"]) == wire_names >= {"via", "signal", "for"}
