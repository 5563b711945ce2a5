"""The README's HTTP API block, run as printed in a copy of the checkout: make a tokens file,
serve, and drive a session with curl (start, inbox, approve with edited arguments, events).

Two liberties, both a reader's own: the server listens on a free port (HITL_API_PORT, which the
README documents) and the curl lines are pointed at it, and each curl line runs in the same
shell as the `export TOKEN=...` line before it, as it would in the reader's terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.devserver import free_port
from tests.support.sessions import eventually
from tests.system.test_readme_commands import (  # noqa: F401  (fixtures)
    API_SECTION,
    Background,
    bash_blocks,
    checkout,
    command_lines,
    default_queue_worker,
    fresh_session,
    section,
    shell_env,
)


class ApiStory:
    def __init__(self, checkout: Path, address: str, port: int) -> None:
        [block] = bash_blocks(section(API_SECTION))
        self.commands = command_lines(block)
        self.cwd = checkout
        self.port = port
        self.env = {**shell_env(address), "HITL_API_PORT": str(port)}
        self.exported = ""
        self.done = 0

    def take(self, expected: str) -> str:
        command = self.commands[self.done]
        assert command.startswith(expected), f"the README prints {command!r} where the story expects {expected!r}"
        self.done += 1
        return command.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")

    def script(self, expected: str) -> str:
        return f"{self.exported}\n{self.take(expected)}" if self.exported else self.take(expected)

    async def run(self, expected: str) -> str:
        completed = await asyncio.to_thread(
            subprocess.run, ["bash", "-c", self.script(expected)], cwd=self.cwd, env=self.env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90,
        )
        assert completed.returncode == 0, (expected, completed.stdout, completed.stderr)
        return completed.stdout


async def test_the_http_api_works_as_printed(
    env: WorkflowEnvironment, default_queue_worker: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker (in this process) trusts the key `serve` makes in the checkout, as one machine would.
    monkeypatch.setenv("HITL_KEYS_DIR", str(checkout / ".hitl"))
    client = env.client
    story = ApiStory(checkout, client.service_client.config.target_host, free_port())
    await fresh_session(client, "web-1")

    await story.run("python -c 'import json, secrets;")
    people = sorted(json.loads((checkout / "tokens.json").read_text()).values())
    assert people == ["ana", "bob"]

    server = Background(story.take("HITL_API_TOKENS=tokens.json python starter.py serve"), checkout, story.env)
    try:
        await eventually(lambda: asyncio.to_thread(healthy, story.port), bool, timeout=60, every=0.2)
        story.exported = story.take("export TOKEN=$(python")

        started = json.loads(await story.run("curl -s -X POST http://127.0.0.1:8000/sessions"))
        assert started["session_id"] == "web-1" and started["status"]["state"] == "awaiting_human"
        assert [(i["call_id"], i["args"]) for i in started["pending"]] == [("call_1", {"path": "travel-policy.md"})]

        inbox_command = story.take("curl -s http://127.0.0.1:8000/inbox")
        rows = await eventually(lambda: shell_json(story, inbox_command),
                                lambda rows: any(row["session_id"] == "web-1" for row in rows))
        assert [row["tool"] for row in rows if row["session_id"] == "web-1"] == ["delete_file"]

        approved = json.loads(await story.run("curl -s -X POST http://127.0.0.1:8000/sessions/web-1/calls/call_1/approve"))
        assert approved["outcome"] == "edited"

        lines = await stream_until(story, story.script("curl -sN http://127.0.0.1:8000/sessions/web-1/events"), "event: answer")
        assert [int(line[4:]) for line in lines if line.startswith("id: ")][:1] == [4]  # after Last-Event-ID: 3
        assert "event: pause_settled" in lines and "event: tool_result" in lines
        assert not (default_queue_worker / "agenda.txt").exists()
        assert (default_queue_worker / "travel-policy.md").exists()
    finally:
        server.stop()
        await fresh_session(client, "web-1")
    assert story.done == len(story.commands), f"not run: {story.commands[story.done:]}"


async def stream_until(story: ApiStory, script: str, text: str) -> list[str]:
    """The lines a never-ending command (curl following a stream) prints until `text`; then it is stopped,
    with its whole process group (bash and curl)."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", script, cwd=story.cwd, env=story.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, start_new_session=True,
    )
    lines: list[str] = []
    try:
        async def read() -> None:
            assert process.stdout is not None
            while not any(text in line for line in lines):
                line = await process.stdout.readline()
                assert line, f"the stream ended before {text!r}: {lines}"
                lines.append(line.decode().rstrip("\r\n"))
        await asyncio.wait_for(read(), 30)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        await process.wait()
    return lines


def healthy(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).status == 200
    except OSError:
        return False


async def shell_json(story: ApiStory, command: str) -> Any:
    completed = await asyncio.to_thread(
        subprocess.run, ["bash", "-c", f"{story.exported}\n{command}"], cwd=story.cwd, env=story.env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )
    return json.loads(completed.stdout)
