"""Building on it (docs/interface.md): a user's own tool tested with the scripted model through
hitl.testing.Harness, and sessions driven with HitlClient, with only `from hitl ...` imports.

The first test is the INTERFACE's example as printed (its module named for where it lives here);
it starts its own embedded dev server. The others run their Harness on the suite's server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl import HitlClient, Refused
from hitl.testing import Harness
from tests.support import refund_tools
from tests.support.docs_example import printed_until, the_worker_line_serves_the_docs_session, write_users_files
from tests.support.stack import ROOT, product_env

TOOLS = ["tests.support.refund_tools"]


# ---------------------------------------------------------------- the docs' example, as printed

@pytest.mark.integration
async def test_a_big_refund_waits_for_a_person(tmp_path):
    script = [{"call": "refund_payment", "args": {"order_id": "A-17", "amount": 250}}, {"say": "Refunded."}]
    async with Harness(tool_modules=["tests.support.refund_tools"], script=script, workspace=tmp_path) as h:
        session = await h.client.start("refund order A-17", session_id="t-1")
        await session.settled()
        [item] = await session.pending()
        assert item.tool == "refund_payment"
        await session.approve(item.call_id, by="ana")
        assert (await session.settled()).last_answer == "Refunded."


# ---------------------------------------------------------------- the scripted model's shapes

def calls_of(transcript: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(call["id"], call["function"]["name"], call["function"]["arguments"])
            for message in transcript if message["role"] == "assistant" for call in message.get("tool_calls") or []]


def results_of(transcript: list[dict[str, Any]]) -> dict[str, str]:
    return {message["tool_call_id"]: message["content"] for message in transcript if message["role"] == "tool"}


async def test_say_answers_and_past_the_end_the_script_says_so(env: WorkflowEnvironment, tmp_path: Path) -> None:
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps([{"say": "Hello."}]))
    async with Harness(script=str(script_file), workspace=tmp_path / "ws", client=env.client) as h:
        session = await h.client.start("hi")
        assert (await session.settled()).last_answer == "Hello."
        await session.message("and now?")
        status = await session.settled()
        assert (status.state, status.last_answer, status.turn) == ("idle", "(end of script)", 2)


async def test_calls_in_one_reply_each_judged_and_the_say_kept(env: WorkflowEnvironment, tmp_path: Path) -> None:
    script = [{"calls": [{"call": "refund_payment", "args": {"order_id": "B-1", "amount": 20}},
                         {"call": "refund_payment", "args": {"order_id": "B-2", "amount": 500}}],
               "say": "Two refunds."},
              {"say": "Both done."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("refund both", by="bob")
        assert (await session.settled()).state == "awaiting_human"
        [item] = await session.pending()  # the small one needs nobody
        assert (item.call_id, item.tool, item.args) == ("call_1_2", "refund_payment", {"order_id": "B-2", "amount": 500})
        decision = await session.approve(item.call_id, by="ana", comment="checked the order")
        assert (decision.accepted, decision.call_id, decision.outcome) == (True, "call_1_2", "approved")
        assert (await session.settled()).last_answer == "Both done."
        transcript = await session.transcript()
    [first] = [m for m in transcript if m["role"] == "assistant" and m.get("tool_calls")]
    assert first["content"] == "Two refunds."
    assert calls_of(transcript) == [("call_1_1", "refund_payment", '{"order_id": "B-1", "amount": 20}'),
                                    ("call_1_2", "refund_payment", '{"order_id": "B-2", "amount": 500}')]
    assert ("B-1", 20.0) in refund_tools.REFUNDS and ("B-2", 500.0) in refund_tools.REFUNDS


async def test_bad_arguments_are_sent_as_written_and_the_model_hears_why(env: WorkflowEnvironment, tmp_path: Path) -> None:
    script = [{"calls": [{"call": "refund_payment", "args": {"order_id": "C-1"}},
                         {"call": "refund_payment", "args": "{not json"},
                         {"call": "no_such_tool", "args": {"x": 1}}]},
              {"say": "I got it wrong."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("refund C-1")
        status = await session.settled()
        assert (status.state, status.last_answer) == ("idle", "I got it wrong."), status
        transcript = await session.transcript()
    assert calls_of(transcript) == [("call_1_1", "refund_payment", '{"order_id": "C-1"}'),
                                    ("call_1_2", "refund_payment", "{not json"),
                                    ("call_1_3", "no_such_tool", '{"x": 1}')]
    results = results_of(transcript)
    assert "amount" in results["call_1_1"], results
    assert "JSON" in results["call_1_2"] or "json" in results["call_1_2"], results
    assert "no_such_tool" in results["call_1_3"], results
    assert not any(order == "C-1" for order, _ in refund_tools.REFUNDS)


async def test_a_child_session_plays_the_script_afresh(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """The root calls the researcher with reply 1; the child starts from reply 1 too (its own
    conversation: a delegation it has no tool for, so it is told so), then answers with reply 2,
    which is the root's delegation result; the root answers with its own reply 2."""
    script = [{"call": "delegate__researcher", "args": {"task": "find the refund policy"}},
              {"say": "Policy found."}]
    agents = {"researcher": {"instructions": "Research.", "tools": ["search_web"]}}
    async with Harness(script=script, agents=agents, workspace=tmp_path, client=env.client) as h:
        root = await h.client.start("what is our refund policy?", session_id=f"root-{tmp_path.name}")
        status = await root.settled()
        assert (status.state, status.last_answer) == ("idle", "Policy found."), status
        child = h.client.session(f"{root.id}/researcher/1")
        child_transcript = await child.transcript()
        root_transcript = await root.transcript()
    # The child's first reply is the script's first, not the root's next.
    assert calls_of(child_transcript)[0][:2] == ("call_1", "delegate__researcher")
    assert [m.get("content") for m in child_transcript if m["role"] == "assistant"] == [None, "Policy found."]
    assert "no tool named 'delegate__researcher'" in results_of(child_transcript)["call_1"]
    assert results_of(root_transcript)["call_1"].endswith("Policy found."), results_of(root_transcript)


# ---------------------------------------------------------------- the client

async def test_a_refused_decision_raises_refused_with_its_code_and_reason(env: WorkflowEnvironment, tmp_path: Path) -> None:
    script = [{"call": "refund_payment", "args": {"order_id": "D-1", "amount": 300}}, {"say": "Done."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("refund D-1")
        await session.settled()
        with pytest.raises(Refused) as unknown:
            await session.approve("call_99", by="ana")
        assert unknown.value.code == "not_found" and "call_99" in unknown.value.reason, unknown.value
        with pytest.raises(Refused) as misfit:
            await session.approve("call_1", by="ana", args={"order_id": "D-1", "amount": "a lot"})
        assert misfit.value.code == "invalid" and "amount" in misfit.value.reason, misfit.value
        [item] = await session.pending()  # nothing was applied
        assert item.call_id == "call_1"
        rejected = await session.reject("call_1", reason="not this one", by="ana")
        assert (rejected.outcome, (await session.settled()).last_answer) == ("rejected", "Done.")
        with pytest.raises(Refused) as settled_already:
            await session.approve("call_1", by="ana")
        assert settled_already.value.code in ("not_found", "conflict"), settled_already.value


async def test_the_client_drives_a_session_through_every_call(env: WorkflowEnvironment, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    script = [{"call": "ask_user_question", "args": {"question": "Which order?"}},
              {"call": "refund_payment", "args": {"order_id": "E-1", "amount": 150}},
              {"say": "Refunded E-1."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        # connect() reads the connection as starter.py does
        monkeypatch.setenv("TEMPORAL_ADDRESS", env.client.service_client.config.target_host)
        monkeypatch.setenv("TEMPORAL_NAMESPACE", env.client.namespace)
        monkeypatch.setenv("HITL_TASK_QUEUE", h.task_queue)
        client = await HitlClient.connect()
        assert client.task_queue == h.task_queue
        session = await client.start("refund an order", session_id=f"client-{tmp_path.name}", by="bob")
        status = await session.settled()
        assert (status.state, status.turn, status.pending) == ("awaiting_human", 1, 1)
        [question] = await session.pending()
        assert (question.kind, question.question) == ("question", "Which order?")
        assert (await session.answer("E-1", by="bob")).outcome == "answered"
        await session.settled()
        [approval] = await session.pending()
        assert (approval.kind, approval.tool) == ("approval", "refund_payment")
        rows = await eventually(lambda: client.inbox(for_person="ana"), lambda rows: any(r.session_id == session.id for r in rows))
        [row] = [row for row in rows if row.session_id == session.id]
        assert (row.call_id, row.tool) == (approval.call_id, "refund_payment")
        followed = asyncio.ensure_future(first_event(session, "pause_settled", approval.call_id))
        await session.approve(approval.call_id, by="ana")
        settled_event = await asyncio.wait_for(followed, 60)
        assert (settled_event.data["outcome"], settled_event.data["by"]) == ("approved", "ana"), settled_event
        assert (await session.settled()).last_answer == "Refunded E-1."
        assert (await client.session(session.id).status()).last_answer == "Refunded E-1."
        audit = await session.audit()
        assert [(e["event"], e.get("by")) for e in audit if e.get("call_id") == approval.call_id][-1] == ("approved", "ana")
        message = await session.message("thanks", by="bob")
        assert message.accepted and message.turn is not None
        assert (await session.settled()).turn == 2
        assert (await session.cancel("done")).accepted
        assert (await session.settled()).state == "closed"


async def first_event(session: Any, kind: str, call_id: str) -> Any:
    async for event in session.events():
        if event.type == kind and event.data.get("call_id") == call_id:
            return event
    raise AssertionError(f"the session closed with no {kind} event")


async def eventually(probe: Any, until: Any, seconds: float = 30) -> Any:
    """The inbox reads visibility, a moment behind the session: asked until it shows, bounded."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        value = await probe()
        if until(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {seconds} s; last: {value!r}")
        await asyncio.sleep(0.1)


# ---------------------------------------------------------------- python worker.py with a script

async def test_the_worker_plays_a_script_file_and_says_so_at_start(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """HITL_MODEL=scripted:PATH on the real command: the banner names the script, and a session on
    its task queue pauses for the user's tool and gets the script's answer once approved."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"call": "refund_payment", "args": {"order_id": "F-1", "amount": 120}},
                                  {"say": "Refunded F-1."}]))
    task_queue = f"scripted-{tmp_path.name}"[:60]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=product_env(HITL_MODEL=f"scripted:{script}", HITL_TOOL_MODULES="tests.support.refund_tools",
                        TEMPORAL_ADDRESS=env.client.service_client.config.target_host, HITL_TASK_QUEUE=task_queue,
                        HITL_WORKSPACE=str(tmp_path / "workspace")))
    try:
        banner = await asyncio.wait_for(printed_until(process, "worker: model: "), 60)
        assert f"worker: model: a scripted model: 2 replies from {script}" in banner, banner
        assert "not an LLM" in banner
        client = HitlClient(env.client, task_queue)
        session = await client.start("refund F-1")
        await asyncio.wait_for(session.settled(), 60)
        [item] = await session.pending()
        assert (item.tool, item.args) == ("refund_payment", {"order_id": "F-1", "amount": 120})
        await session.approve(by="ana")
        assert (await asyncio.wait_for(session.settled(), 60)).last_answer == "Refunded F-1."
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)


# ---------------------------------------------------------------- editing one argument from the command line

async def test_approve_args_on_the_command_line_name_only_what_changes(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """`approve --args '{"amount": 90}'` on a two-argument tool keeps the order id the model sent."""
    script = [{"call": "refund_payment", "args": {"order_id": "G-1", "amount": 250}}, {"say": "Done."}]
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, client=env.client) as h:
        session = await h.client.start("refund G-1", session_id=f"edit-{tmp_path.name}")
        await session.settled()
        shell = {"TEMPORAL_ADDRESS": env.client.service_client.config.target_host, "HITL_TASK_QUEUE": h.task_queue}
        approved = await asyncio.to_thread(
            subprocess.run, [sys.executable, "starter.py", "approve", session.id, "--args", '{"amount": 90}', "--by", "ana"],
            cwd=ROOT, env=product_env(**shell), capture_output=True, text=True, timeout=120)
        assert approved.returncode == 0, approved.stderr
        assert "edit: amount: 250 -> 90" in approved.stdout and "order_id" not in approved.stdout, approved.stdout
        assert "outcome=edited" in approved.stdout, approved.stdout
        assert (await session.settled()).last_answer == "Done."
        results = results_of(await session.transcript())
    assert results["call_1"].endswith("Refunded 90.00 on order G-1."), results


# ---------------------------------------------------------------- the docs' own files, as printed

@pytest.mark.integration
async def test_the_docs_tool_and_its_test_run_as_printed_in_a_folder_of_their_own(tmp_path: Path) -> None:
    """docs/interface.md's my_tools.py, test_my_tools.py and script.json, written to a user's folder outside the
    checkout and run with pytest there: the product is imported as installed, nothing else runs."""
    project = tmp_path / "project"
    files = write_users_files(project)
    assert set(files) == {"my_tools.py", "pytest.ini", "test_my_tools.py", "script.json"}, sorted(files)
    assert all(line.startswith(("from hitl", "from typing", "from pathlib")) for text in files.values()
               for line in text.splitlines() if line.startswith(("from ", "import "))), files
    environment = {**product_env(), "PYTHONPATH": str(ROOT)}  # the product as installed: not the tests
    ran = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         "--rootdir", str(project), "--basetemp", str(tmp_path / "basetemp"), "test_my_tools.py"],
        cwd=project, env=environment, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-4000:] + ran.stderr[-2000:]



async def test_the_docs_worker_line_serves_the_docs_script_from_the_users_folder(
        env: WorkflowEnvironment, tmp_path: Path) -> None:
    """The page's worker line, as `python /path/to/worker.py`, started in the folder of its my_tools.py
    and script.json: the script's refund is the user's tool, and it waits for a person."""
    project = tmp_path / "project"
    write_users_files(project)
    await the_worker_line_serves_the_docs_session([sys.executable, str(ROOT / "worker.py")], project, env.client,
                                                  {**product_env(), "PYTHONPATH": str(ROOT)})


async def test_the_harness_gives_the_worker_its_policy_and_puts_the_environment_back(
        env: WorkflowEnvironment, tmp_path: Path) -> None:
    """A policy given as a dict binds the worker while the harness runs: a note read needs a person
    named in it, and the person it does not name is refused; afterwards HITL_POLICY is as it was."""
    before = os.environ.get("HITL_POLICY")
    policy = {"tools": {"order_note": {"approval": "always", "approvers": ["carol"]}}}
    script = [{"call": "order_note", "args": {"order_id": "H-1"}}, {"say": "Read."}]
    (tmp_path / "H-1.txt").write_text("fragile")
    async with Harness(tool_modules=TOOLS, script=script, workspace=tmp_path, policy=policy,
                       env={"HITL_HARNESS_PROBE": "1"}, client=env.client) as h:
        assert os.environ["HITL_HARNESS_PROBE"] == "1"
        session = await h.client.start("read the note of H-1")
        assert (await session.settled()).state == "awaiting_human"
        [item] = await session.pending()
        assert (item.tool, item.approvers) == ("order_note", ["carol"]), item
        with pytest.raises(Refused) as refused:
            await session.approve(item.call_id, by="ana")
        assert refused.value.code == "forbidden", refused.value
        await session.approve(item.call_id, by="carol")
        assert (await session.settled()).last_answer == "Read."
        assert results_of(await session.transcript())["call_1"] == "fragile"
    assert os.environ.get("HITL_POLICY") == before and "HITL_HARNESS_PROBE" not in os.environ
