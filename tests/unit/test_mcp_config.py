"""HITL_MCP_CONFIG: a file the worker cannot use stops it at start, with the entry and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from activities.mcp import McpConfigError, parse_config
from tests.support.stack import nobody_listens, run_product, run_starter


@pytest.mark.parametrize("document, reason", [
    ([], 'a JSON object with an "mcpServers" object'),
    ({"servers": {}}, 'a JSON object with an "mcpServers" object'),
    ({"mcpServers": {"git": "mcp-server-git"}}, "mcpServers.git: must be an object"),
    ({"mcpServers": {"git": {}}}, "mcpServers.git: give either command (a stdio server) or url"),
    ({"mcpServers": {"git": {"command": "x", "url": "http://h/mcp"}}}, "not both or neither"),
    ({"mcpServers": {"web": {"url": "ftp://h/mcp"}}}, "url must start with http:// or https://"),
    ({"mcpServers": {"git": {"command": "x", "args": "--repository ."}}}, "mcpServers.git: args: Input should be a valid list"),
    ({"mcpServers": {"g it": {"command": "x"}}}, "a server name is 1-40 letters, digits, _ or -"),
    ({"mcpServers": {"git": {"command": "x", "auto_approve": ["git_add"], "require_approval": ["git_add"]}}},
     "git_add cannot be in both auto_approve and require_approval"),
    ({"mcpServers": {"git": {"command": "x", "sandbox": {"paths": ["repo"]}}}}, "sandbox paths must be absolute, not 'repo'"),
    ({"mcpServers": {"git": {"command": "x", "cwd": "/srv", "sandbox": {"read_only": ["/opt"]}}}},
     "cwd '/srv' is not inside a path the sandbox grants"),
    ({"mcpServers": {"git": {"command": "x", "sandbox": {"path": ["/srv"]}}}}, "sandbox.SandboxGrant.path: Extra inputs"),
])
def test_a_malformed_config_says_which_entry_and_why(document: object, reason: str) -> None:
    with pytest.raises(McpConfigError) as error:
        parse_config(document)
    assert reason in str(error.value)


def test_other_clients_keys_are_ignored_and_disabled_servers_left_out() -> None:
    servers = parse_config({"mcpServers": {
        "git": {"type": "stdio", "command": "mcp-server-git", "args": ["--repository", "."], "env": {"A": "1"}},
        "docs": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"Authorization": "Bearer x"}},
        "old": {"command": "x", "disabled": True},
    }})
    assert sorted(servers) == ["docs", "git"]
    assert servers["git"].transport == "stdio" and servers["docs"].transport == "streamable HTTP"


async def test_the_worker_and_starter_stop_at_start_on_a_bad_file(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"git": {"command": "mcp-server-git", "url": "http://h/mcp"}}}))
    worker = await run_product("worker.py", HITL_MCP_CONFIG=str(config), TEMPORAL_ADDRESS=nobody_listens())
    assert worker.returncode == 1
    assert worker.stderr.strip().splitlines()[-1] == (
        f"worker: HITL_MCP_CONFIG={config}: mcpServers.git: give either command (a stdio server) "
        "or url (streamable HTTP), not both or neither")
    config.write_text("{not json")
    listed = await run_starter("tools", HITL_MCP_CONFIG=str(config))
    assert listed.returncode == 2 and f"error: HITL_MCP_CONFIG={config}: not JSON" in listed.stderr
    missing = await run_starter("tools", HITL_MCP_CONFIG=str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "cannot read it" in missing.stderr


async def test_starter_tools_lists_every_tool_as_json(tmp_path: Path) -> None:
    listed = await run_starter("--json", "tools", HITL_TOOL_MODULES="tests.support.example_tools")
    assert listed.returncode == 0, listed.stderr
    tools = {row["name"]: row for row in json.loads(listed.stdout)["tools"]}
    assert tools["book_flight"]["source"] == "built-in" and tools["book_flight"]["approval"] == "needs approval"
    assert tools["ask_user_question"]["approval"] == "a person answers it"
    assert tools["transfer_money"]["source"] == "user (tests.support.example_tools)"
    assert tools["transfer_money"]["approval"] == "approval when its arguments call for it"
