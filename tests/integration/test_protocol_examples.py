"""The client examples of the protocol pages work as printed: docs/ag-ui.md's script with the official
@ag-ui/client, docs/a2a.md's with the a2a-sdk client, and docs/mcp-elicitation.md's tool server
written with the official `mcp` SDK, declared as printed. Each is taken from its page, saved under
the name the page gives it, and run against a real API and worker: it starts a session, sees its
pause, and decides it (or, for the server, its question is a pause that a person answers).

The scripts' bash lines run exactly as printed, with the API's own port for the README's 8000 and
the README's `TOKEN` set to bob's token; the base URL and the token reach the scripts as the pages
say, through HITL_API_URL and HITL_API_TOKEN."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.ag_ui_client import DRIVER
from tests.support.api_server import Api, api, serving, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.fake_openai import tool_calls, text
from tests.support.mcp_servers import mcp_agent, tool_output, tool_results
from tests.support.sessions import eventually, settled
from tests.system.test_readme_commands import (
    A2A_EXAMPLE, AG_UI_EXAMPLE, MCP_ELICITATION_EXAMPLE, VENV_BIN, bash_blocks, command_lines, section, shell_env,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
README_API = "http://127.0.0.1:8000"


def saved_example(heading: str, language: str, folder: Path) -> Path:
    """The section's one `language` block, saved in `folder` under the name its first line gives."""
    [code] = re.findall(rf"```{language}\n(.*?)```", section(heading), re.S)
    name = re.match(r"(?://|#) (\S+)\n", code)
    assert name, f"{heading}: the example's first line names its file"
    path = folder / name.group(1)
    path.write_text(code)
    return path


async def run_printed(heading: str, api: Api, folder: Path) -> list[str]:
    """The section's bash lines, as printed, by bash in `folder`; the lines they print."""
    [block] = bash_blocks(section(heading))
    script = "\n".join(command_lines(block)).replace(README_API, api.base)
    completed = await asyncio.to_thread(
        subprocess.run, ["bash", "-ec", script], cwd=folder, capture_output=True, text=True, timeout=180,
        env={**shell_env(None), "TOKEN": token_of("bob")},
    )
    assert completed.returncode == 0, (completed.stdout, completed.stderr)
    return completed.stdout.splitlines()


async def audit_of(api: Api, session: str) -> list[dict]:
    async with api.as_("bob") as http:
        return (await http.get(f"/sessions/{session}/audit")).json()


async def test_the_ag_ui_script_starts_a_session_sees_its_pause_and_approves_it(api: Api, tmp_path: Path) -> None:
    saved_example(AG_UI_EXAMPLE, "js", tmp_path)
    (tmp_path / "node_modules").symlink_to(DRIVER.parent / "node_modules")  # `npm install` as the page says, done once
    printed = await run_printed(AG_UI_EXAMPLE, api, tmp_path)

    session = printed[0].removeprefix("session ")
    assert re.fullmatch(r"agui-[0-9a-f]{8}", session), printed
    assert printed[1:] == [
        "paused: approve delete_file: deletes notes.txt now (tool_call, call_1)",
        'decided: {"interruptId":"call_1","decision":"approve","by":"bob","outcome":"approved"}',
        "agent: Deleted notes.txt.",
        "pauses left: 0",
    ], printed
    assert not (api.agent.workspace / "notes.txt").exists()
    [approved] = [event for event in await audit_of(api, session) if event["event"] == "approved"]
    assert (approved["by"], approved["via"]) == ("bob", "ag-ui")


async def test_the_a2a_script_starts_a_session_sees_its_pause_and_approves_it(api: Api, tmp_path: Path) -> None:
    saved_example(A2A_EXAMPLE, "python", tmp_path)
    printed = await run_printed(A2A_EXAMPLE, api, tmp_path)

    session = printed[0].removeprefix("session ")
    assert printed[1:] == [
        "paused: approval of delete_file {'path': 'notes.txt'} (call_1)",
        "TASK_STATE_COMPLETED: Deleted notes.txt.",
    ], printed
    assert not (api.agent.workspace / "notes.txt").exists()
    [approved] = [event for event in await audit_of(api, session) if event["event"] == "approved"]
    assert (approved["by"], approved["via"]) == ("bob", "a2a")


async def test_the_tool_server_asks_in_form_mode_and_the_answer_books_the_table(
    env, workspace: Path, tmp_path: Path, signing_key: str, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """The page's server in the folder its declaration names, that declaration as printed but for
    the folder (the test's own, for /srv/tools) and `python` found first in this project's venv,
    where the page's reader installed the SDK."""
    tools = tmp_path / "tools"
    tools.mkdir()
    saved_example(MCP_ELICITATION_EXAMPLE, "python", tools)
    [declared] = re.findall(r"```json\n(.*?)```", section(MCP_ELICITATION_EXAMPLE), re.S)[:1]
    servers = json.loads(declared.replace("/srv/tools", str(tools)))["mcpServers"]
    monkeypatch.setenv("PATH", f"{VENV_BIN}:{shell_env(None)['PATH']}")

    async with mcp_agent(env.client, workspace, servers) as (agent, fake, _), serving(agent) as running:
        fake.script(tool_calls(("call_1", "mcp__diner__book_table", {"day": "friday"})), text("Booked."))
        session = (await running.start("ana", "book a table for friday"))["session_id"]
        async with running.as_("ana") as http:
            async def pending() -> list[dict]:
                return (await http.get(f"/sessions/{session}/pending")).json()

            [item] = await eventually(pending, lambda items: len(items) == 1)
            assert (item["call_id"], item["kind"], item["server"]) == ("call_1~input1", "question", "diner")
            assert (item["question"], item["because"]) == ("Who is the table for?", "the MCP server diner asks a person")
            assert [(f["name"], f["type"]) for f in item["fields"]] == [("name", "string"), ("guests", "integer")]
            answered = await http.post(f"/sessions/{session}/calls/call_1~input1/answer",
                                       json={"answer": {"name": "Ana", "guests": 3}})
            assert answered.status_code == 200, answered.text
        assert (await settled(agent.client.get_workflow_handle(session)))["last_answer"] == "Booked."
    assert tool_output(tool_results(fake)["call_1"], "mcp__diner__book_table") == "booked friday for Ana, 3 guests"


def test_the_protocol_pages_are_linked_from_the_readme_and_the_interface_page() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    interface = (DOCS / "interface.md").read_text()
    for page in ("ag-ui.md", "a2a.md", "mcp-elicitation.md"):
        assert f"(docs/{page})" in readme, page
        assert f"]({page})" in interface, page
