"""AG-UI's door (POST /ag-ui) driven by the official client, @ag-ui/client's HttpAgent, from node:
a run ends at a pause with an interrupt per open pause, and the next run's resume decides it, as
the token's person, under the API's rules, once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from tests.integration.test_sub_agents import JANITOR
from tests.integration.test_sub_agents_api import delegating_api  # noqa: F401  (a fixture)
from tests.support.ag_ui_client import drive, step
from tests.support.api_server import Api, api, new_id, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.sessions import eventually
from tests.system.test_readme_commands import AG_UI_SECTION, bash_blocks, command_lines, section

APPROVE = {"status": "resolved", "payload": {"decision": "approve"}}  # the older payload shape, still accepted
APPROVED = {"status": "resolved", "payload": {"approved": True}}  # AG-UI's recommended shape
DRAFT = "draft an email to ana@example.com about lunch saying see you at noon"  # its result waits for review


async def audit_of(api: Api, session: str, person: str = "ana") -> list[dict]:
    async with api.as_(person) as http:
        return (await http.get(f"/sessions/{session}/audit")).json()


async def test_an_approval_is_a_tool_call_interrupt_and_approved_true_runs_the_tool_once(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    asked, approved = await drive(api, session, step("ana", message="please delete notes.txt"), step("ana", resume=APPROVED))

    assert asked.types[0] == "RUN_STARTED" and asked.types[-1] == "RUN_FINISHED", asked.types
    [interrupt] = asked.interrupts
    [started] = asked.of_type("TOOL_CALL_START")
    assert started["toolCallName"] == "delete_file"
    assert interrupt["id"] == interrupt["toolCallId"] == started["toolCallId"]
    assert interrupt["reason"] == "tool_call"  # AG-UI's core reason for a pause bound to a tool call
    schema = interrupt["responseSchema"]
    assert schema["required"] == ["approved"] and schema["properties"]["approved"] == {"type": "boolean"}
    assert schema["properties"]["editedArgs"]["type"] == "object"  # the client may offer to edit
    assert interrupt["metadata"]["hitl"]["args"] == {"path": "notes.txt"}
    assert [i["id"] for i in asked.pending] == [interrupt["id"]]  # the client holds it to resume

    assert approved.finished and approved.failed is None, approved.failed
    assert approved.custom("hitl.resume")[0]["outcome"] == "approved", approved.events
    [result] = approved.of_type("TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["id"]
    assert approved.interrupts == [] and approved.pending == []
    assert approved.of_type("TEXT_MESSAGE_CONTENT"), approved.types  # the model's answer after the tool
    assert not (api.agent.workspace / "notes.txt").exists()
    audit = await audit_of(api, session)
    [decision] = [event for event in audit if event["event"] == "approved"]
    assert (decision["by"], decision["via"]) == ("ana", "ag-ui")


async def test_edited_args_replace_the_call_s_arguments_and_bad_ones_are_refused_with_nothing_run(api: Api) -> None:
    workspace = api.agent.workspace
    (workspace / "notes.txt").write_text("notes\n")
    (workspace / "old.txt").write_text("old\n")
    session = new_id()
    [asked] = await drive(api, session, step("ana", message="please delete notes.txt"))
    call = asked.interrupts[0]["id"]

    def edited(args: object) -> list[dict]:
        return [{"interruptId": call, "status": "resolved", "payload": {"approved": True, "editedArgs": args}}]

    not_an_object, unfit = await drive(api, session, step("ana", entries=edited("old.txt")),
                                       step("ana", entries=edited({"file": "old.txt"})))
    assert not_an_object.types == ["RUN_STARTED", "RUN_ERROR"], not_an_object.events
    assert not_an_object.of_type("RUN_ERROR")[0]["code"] == "422"
    assert not_an_object.error.startswith(f"resume {call}: editedArgs ") and "object" in not_an_object.error
    assert unfit.of_type("RUN_ERROR")[0]["code"] == "422", unfit.events
    assert unfit.error.startswith(f"resume {call}: edited args do not fit delete_file"), unfit.error
    assert "\n" not in unfit.error
    assert (workspace / "notes.txt").exists() and (workspace / "old.txt").exists()  # nothing ran
    assert [event["event"] for event in await audit_of(api, session)] == ["requested"]  # nothing decided

    [approved] = await drive(api, session, step("ana", entries=edited({"path": "old.txt"})))
    assert approved.custom("hitl.resume")[0]["outcome"] == "edited", approved.events
    assert approved.of_type("TOOL_CALL_RESULT"), approved.events
    assert not (workspace / "old.txt").exists() and (workspace / "notes.txt").exists()  # the edit, in full, ran
    [decision] = [event for event in await audit_of(api, session) if event["event"] == "edited"]
    assert (decision["by"], decision["via"]) == ("ana", "ag-ui")


async def test_an_approval_counts_only_for_the_arguments_its_interrupt_showed(api: Api) -> None:
    """Two approvals needed: bob's client shows notes.txt; carol approves with the path edited to
    old.txt (one of two, the votes start again). Bob's resume, sent back with the digest his
    interrupt offered, no longer fits: refused, and old.txt is not deleted on his word."""
    workspace = api.agent.workspace
    (workspace / "notes.txt").write_text("notes\n")
    (workspace / "old.txt").write_text("old\n")
    session = new_id()
    rules = {"session": {"participants": ["bob", "carol"], "approvers": {"delete_file": ["bob", "carol"]},
                         "required_approvals": {"delete_file": 2}}}
    [asked] = await drive(api, session, step("ana", message="please delete notes.txt", forwardedProps=rules))
    [interrupt] = asked.interrupts
    digest = interrupt["responseSchema"]["properties"]["expectedArgsSha256"]["default"]
    async with api.as_("carol") as carol:
        edited = await carol.post(f"/sessions/{session}/calls/{interrupt['id']}/approve",
                                  json={"args": {"path": "old.txt"}})
        assert edited.status_code == 200 and edited.json()["outcome"] == "awaiting_more_approvals", edited.text
    bobs = {"interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True, "expectedArgsSha256": digest}}
    [stale] = await drive(api, session, step("bob", entries=[bobs]))

    assert stale.types == ["RUN_STARTED", "RUN_ERROR"], stale.events
    assert stale.of_type("RUN_ERROR")[0]["code"] == "409" and "stale" in stale.error, stale.events
    assert (workspace / "old.txt").exists() and (workspace / "notes.txt").exists()
    assert not [event for event in await audit_of(api, session) if event.get("by") == "bob" and event["event"] != "refused"]


async def test_approved_false_with_a_reason_rejects_and_the_model_reads_the_reason(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    denied = {"status": "resolved", "payload": {"approved": False, "reason": "keep it, it is the only copy"}}
    _, rejected = await drive(api, session, step("ana", message="please delete notes.txt"), step("ana", resume=denied))

    assert rejected.finished and rejected.interrupts == [], rejected.events
    assert rejected.custom("hitl.resume")[0]["decision"] == "reject", rejected.events
    [result] = rejected.of_type("TOOL_CALL_RESULT")
    assert "keep it, it is the only copy" in result["content"]
    assert (api.agent.workspace / "notes.txt").exists()
    [decision] = [event for event in await audit_of(api, session) if event["event"] == "rejected"]
    assert (decision["by"], decision["via"]) == ("ana", "ag-ui")
    assert decision["reason"].endswith("Reason: keep it, it is the only copy")


async def test_a_review_is_a_tool_call_interrupt_whose_approval_may_replace_the_result(api: Api) -> None:
    session = new_id()
    [asked] = await drive(api, session, step("ana", message=DRAFT))
    [review] = asked.interrupts
    assert (review["reason"], review["toolCallId"]) == ("tool_call", review["id"]), review
    assert review["metadata"]["hitl"]["kind"] == "review"
    assert set(review["responseSchema"]["properties"]) >= {"approved", "editedResult"}
    assert "editedArgs" not in review["responseSchema"]["properties"]  # it has run: its args are history

    def approved(**edit: object) -> list[dict]:
        return [{"interruptId": review["id"], "status": "resolved", "payload": {"approved": True, **edit}}]

    refused, reviewed = await drive(api, session, step("ana", entries=approved(editedArgs={})),
                                    step("ana", entries=approved(editedResult="Lunch moved to 1pm.")))
    assert refused.of_type("RUN_ERROR")[0]["code"] == "422" and "editedResult" in refused.error, refused.events
    [result] = reviewed.of_type("TOOL_CALL_RESULT")
    assert "Lunch moved to 1pm." in result["content"], reviewed.events


async def test_the_older_payload_shape_still_decides_a_reject_with_a_reason_reaches_the_model(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    reject = {"status": "resolved", "payload": {"decision": "reject", "reason": "keep it, it is the only copy"}}
    _, rejected = await drive(api, session, step("ana", message="please delete notes.txt"), step("ana", resume=reject))

    assert rejected.finished and rejected.interrupts == [], rejected.events
    [result] = rejected.of_type("TOOL_CALL_RESULT")
    assert "keep it, it is the only copy" in result["content"]
    assert (api.agent.workspace / "notes.txt").exists()
    [decision] = [event for event in await audit_of(api, session) if event["event"] == "rejected"]
    assert (decision["by"], decision["via"]) == ("ana", "ag-ui")
    assert decision["reason"].endswith("Reason: keep it, it is the only copy")


async def test_a_question_is_an_interrupt_with_its_form_as_schema_and_the_answer_goes_on(api: Api) -> None:
    session = new_id()
    answer = {"status": "resolved", "payload": {"decision": "answer", "answer": {"date": "2026-12-24"}}}
    asked, answered = await drive(api, session, step("ana", message="please book a flight to Paris from Berlin"),
                                  step("ana", resume=answer))

    [question] = asked.interrupts
    assert (question["reason"], question["message"]) == ("input_required", "On what date do you want to fly?")
    assert question["toolCallId"] == question["id"]  # the model's ask_user_question call
    schema = question["responseSchema"]["properties"]
    assert schema["decision"] == {"enum": ["answer", "reject"]}
    assert schema["answer"]["properties"] == {"date": {"type": "string", "format": "date"}}
    [booking] = answered.interrupts  # the answer went on to the booking, which waits for approval
    assert booking["metadata"]["hitl"]["tool"] == "book_flight"
    assert booking["metadata"]["hitl"]["args"]["date"] == "2026-12-24"
    [decision] = [event for event in await audit_of(api, session) if event["event"] == "answered"]
    assert (decision["by"], decision["via"]) == ("ana", "ag-ui")


async def test_a_resume_from_someone_who_may_not_decide_is_a_run_error_and_the_approvers_counts(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    rules = {"session": {"participants": ["bob"], "approvers": {"delete_file": ["carol"]}}}
    asked, by_bob, by_carol, look = await drive(
        api, session, step("ana", message="please delete notes.txt", forwardedProps=rules),
        step("bob", resume=APPROVE), step("carol", resume=APPROVE), step("ana"),
    )

    [interrupt] = asked.interrupts
    assert by_bob.types == ["RUN_STARTED", "RUN_ERROR"], by_bob.events
    [error] = by_bob.of_type("RUN_ERROR")
    assert error["code"] == "403" and "\n" not in error["message"]
    assert error["message"].startswith(f"resume {interrupt['id']}: ")
    # Carol may read the session only while the call waits for her: her run ends with her decision.
    assert by_carol.finished and not by_carol.of_type("RUN_ERROR"), by_carol.events
    assert by_carol.custom("hitl.resume")[0]["outcome"] == "approved"
    assert by_carol.of_type("RUN_FINISHED")[0]["result"]["access_ended"] is True
    assert look.of_type("RUN_FINISHED")[0]["result"]["state"] == "idle"  # a run with nothing to send: a look
    assert not (api.agent.workspace / "notes.txt").exists()
    decisions = [event for event in await audit_of(api, session) if event["event"] == "approved"]
    assert [(event["by"], event["via"]) for event in decisions] == [("carol", "ag-ui")]


async def test_the_same_resume_twice_decides_once_and_says_so(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    asked, approved = await drive(api, session, step("ana", message="please delete notes.txt"), step("ana", resume=APPROVE))
    entry = {"interruptId": asked.interrupts[0]["id"], **APPROVE}
    [again] = await drive(api, session, step("ana", entries=[entry]))

    assert again.finished and not again.of_type("RUN_ERROR"), again.events
    assert again.custom("hitl.resume") == [{"interruptId": entry["interruptId"], "decision": "approve", "by": "ana",
                                            "already_decided": True}]
    assert not again.of_type("TOOL_CALL_RESULT")
    audit = await audit_of(api, session)
    assert [event["event"] for event in audit].count("approved") == 1
    assert len([r for r in approved.of_type("TOOL_CALL_RESULT")]) == 1


async def test_a_resume_for_an_unknown_or_settled_interrupt_decides_nothing(api: Api) -> None:
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    session = new_id()
    [asked] = await drive(api, session, step("ana", message="please delete notes.txt"))
    call = asked.interrupts[0]["id"]
    unknown = [{"interruptId": call, **APPROVE}, {"interruptId": "no-such-call", **APPROVE}]
    [refused] = await drive(api, session, step("ana", entries=unknown))

    assert refused.types == ["RUN_STARTED", "RUN_ERROR"], refused.events
    assert refused.error == f"resume no-such-call: no call 'no-such-call' waits in session {session!r}"
    assert (api.agent.workspace / "notes.txt").exists()
    assert [event["event"] for event in await audit_of(api, session)] == ["requested"]  # nothing decided

    reject = {"status": "resolved", "payload": {"decision": "reject"}}
    approved, otherwise = await drive(api, session, step("ana", entries=[{"interruptId": call, **APPROVE}]),
                                      step("ana", entries=[{"interruptId": call, **reject}]))
    assert approved.finished and not approved.of_type("RUN_ERROR")
    assert otherwise.error.startswith(f"resume {call}: {call} is already settled (approved by ana via ag-ui at "), otherwise.error
    assert [event["event"] for event in await audit_of(api, session)].count("rejected") == 0


async def test_the_curl_lines_of_the_interface_page_work_as_printed(api: Api) -> None:
    """docs/interface.md's two curl lines, run by bash as printed, with two liberties: the API's port
    and a fresh thread id (the dev server is shared)."""
    (api.agent.workspace / "notes.txt").write_text("notes\n")
    [block] = bash_blocks(section(AG_UI_SECTION))
    thread = new_id()
    outputs = []
    for command in command_lines(block):
        script = command.replace("http://127.0.0.1:8000", api.base).replace('"agui-1"', f'"{thread}"')
        completed = await asyncio.to_thread(subprocess.run, ["bash", "-c", script], capture_output=True, text=True,
                                            timeout=90, env={**os.environ, "TOKEN": token_of("ana")})
        assert completed.returncode == 0, completed.stderr
        outputs.append([json.loads(line[6:]) for line in completed.stdout.splitlines() if line.startswith("data: ")])
    asked, approved = outputs
    assert asked[-1]["outcome"]["interrupts"][0]["id"] == "call_1"
    assert [event["type"] for event in approved if event["type"] in ("TOOL_CALL_RESULT", "RUN_FINISHED")] == [
        "TOOL_CALL_RESULT", "RUN_FINISHED"]
    assert approved[-1]["result"]["state"] == "idle"
    assert not (api.agent.workspace / "notes.txt").exists()


async def test_bad_bodies_are_422_and_refusals_are_one_line_run_errors(api: Api) -> None:
    async with api.as_(None) as anonymous:
        assert (await anonymous.post("/ag-ui", json={"threadId": "t", "runId": "r", "messages": []})).status_code == 401
    async with api.as_("ana") as http:
        bad = await http.post("/ag-ui", json={"threadId": "t", "messages": []})
        assert bad.status_code == 422
        assert bad.json()["detail"].startswith("not an AG-UI RunAgentInput: ") and "\n" not in bad.json()["detail"]
        assert (await http.post("/ag-ui", json={"threadId": "no spaces", "runId": "r", "messages": []})).status_code == 422
        nothing = await http.post("/ag-ui", json={"threadId": new_id(), "runId": "r", "messages": []})
    assert nothing.status_code == 200
    events = [json.loads(line[6:]) for line in nothing.text.splitlines() if line.startswith("data: ")]
    assert [event["type"] for event in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1]["code"] == "422" and "send a user message to start it" in events[1]["message"]

    session = new_id()
    [asked] = await drive(api, session, step("ana", message="please delete notes.txt"))
    [unfit] = await drive(api, session, step("ana", entries=[
        {"interruptId": asked.interrupts[0]["id"], "status": "resolved", "payload": {"decision": "answer", "answer": "x"}}]))
    assert unfit.error == f"resume {asked.interrupts[0]['id']}: an approval is decided with approve or reject, not answer"
    assert [event["event"] for event in await audit_of(api, session)] == ["requested"]


async def test_the_same_resume_twice_for_a_childs_call_decides_once_and_says_so(delegating_api: Api) -> None:
    """A sub-agent's call, listed by its root, is resumed through the root's thread; sent again (a
    client that did not hear back), it is already decided, as a call of the root's own would be."""
    started = await delegating_api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR})
    root = started["session_id"]
    async with delegating_api.as_("ana") as ana:
        listed = await eventually(lambda: ana.get(f"/sessions/{root}/pending"), lambda answer: bool(answer.json()))
    [item] = listed.json()
    entry = {"interruptId": item["call_id"], **APPROVE}
    first, again = await drive(delegating_api, root, step("ana", entries=[entry]), step("ana", entries=[entry]))

    assert first.custom("hitl.resume")[0]["outcome"] == "approved", first.events
    assert again.finished and not again.of_type("RUN_ERROR"), again.events
    assert again.custom("hitl.resume") == [{"interruptId": item["call_id"], "decision": "approve", "by": "ana",
                                            "already_decided": True}]
    assert not (delegating_api.agent.workspace / "notes.txt").exists()
    # A call of a child the root never had is no call: said in one line, nothing decided.
    [unknown] = await drive(delegating_api, root, step("ana", entries=[{**entry, "interruptId": f"{root}/janitor/9/call_1"}]))
    [error] = unknown.of_type("RUN_ERROR")
    assert error["code"] == "404" and "no call" in error["message"], error
