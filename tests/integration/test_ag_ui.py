"""AG-UI's door (POST /ag-ui) driven by the official client, @ag-ui/client's HttpAgent, from node:
a run ends at a pause with an interrupt per open pause, and the next run's resume decides it, as
the token's person, under the API's rules, once."""

from __future__ import annotations

from tests.support.ag_ui_client import drive, step
from tests.support.api_server import Api, api, new_id, signing_key  # noqa: F401  (fixtures)

APPROVE = {"status": "resolved", "payload": {"decision": "approve"}}


async def audit_of(api: Api, session: str, person: str = "ana") -> list[dict]:
    async with api.as_(person) as http:
        return (await http.get(f"/sessions/{session}/audit")).json()


async def test_a_run_ends_at_the_approval_and_the_next_run_approves_it_and_the_tool_runs_once(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    asked, approved = await drive(api, session, step("ana", message="please delete notes.txt"), step("ana", resume=APPROVE))

    assert asked.types[0] == "RUN_STARTED" and asked.types[-1] == "RUN_FINISHED", asked.types
    [interrupt] = asked.interrupts
    [started] = asked.of_type("TOOL_CALL_START")
    assert started["toolCallName"] == "delete_file"
    assert interrupt["id"] == interrupt["toolCallId"] == started["toolCallId"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["responseSchema"]["properties"]["decision"] == {"enum": ["approve", "reject"]}
    assert interrupt["metadata"]["hitl"]["args"] == {"path": "notes.txt"}
    assert [i["id"] for i in asked.pending] == [interrupt["id"]]  # the client holds it to resume

    assert approved.finished and approved.failed is None, approved.failed
    [result] = approved.of_type("TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["id"]
    assert approved.interrupts == [] and approved.pending == []
    assert approved.of_type("TEXT_MESSAGE_CONTENT"), approved.types  # the model's answer after the tool
    assert not (api.agent.workspace / "notes.txt").exists()
    audit = await audit_of(api, session)
    [decision] = [event for event in audit if event["event"] == "approved"]
    assert (decision["by"], decision["via"]) == ("ana", "ag-ui")
