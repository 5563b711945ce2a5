"""The user's files docs/interface.md prints under "Your own tools" and "Testing your own tool":
`my_tools.py`, `pytest.ini`, `test_my_tools.py`, the `script.json` its shell lines write and the
worker line run beside them, read from the page so the tests that run them cannot drift from it."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from temporalio.client import Client

from hitl import HitlClient
from tests.support.stack import ROOT

SECTION_START, SECTION_END = "## Your own tools", "### Driving sessions from Python"
PAGE = ROOT / "docs" / "interface.md"


def section(page: Path = PAGE) -> str:
    text = page.read_text()
    return text[text.index(SECTION_START):text.index(SECTION_END)]


def users_files(page: Path = PAGE) -> dict[str, str]:
    """File name -> text, as printed; a name printed twice is a page that cannot be followed."""
    printed = re.findall(r"```(?:python|ini)\n# ([\w.]+\.(?:py|ini))\n(.*?)```", section(page), re.S)
    names = [name for name, _ in printed]
    assert len(names) == len(set(names)), f"{page.name} prints these files more than once: {names}"
    files = dict(printed)
    [script] = re.findall(r"^echo '(.*)' > script\.json$", section(page), re.M)
    files["script.json"] = script + "\n"
    return files


def write_users_files(folder: Path) -> dict[str, str]:
    files = users_files()
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def worker_variables(page: Path = PAGE) -> dict[str, str]:
    """The variables of the page's `... hitl-worker` line, run in the folder of the files above."""
    [line] = re.findall(r"^((?:[A-Z_]+=\S+ )+)hitl-worker\b", section(page), re.M)
    return dict(pair.split("=", 1) for pair in line.split())


async def the_worker_line_serves_the_docs_session(command: list[str], folder: Path, client: Client,
                                                  environment: dict[str, str]) -> None:
    """`command` (the page's `hitl-worker`, or `python .../worker.py`) started in `folder` with the
    page's variables: the refund the script asks for pauses for a person, and once approved the
    tool's result and the script's answer come back."""
    task_queue = f"docs-{folder.parent.name}"[:60]
    process = await asyncio.create_subprocess_exec(
        *command, cwd=folder, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**environment, **worker_variables(), "TEMPORAL_ADDRESS": client.service_client.config.target_host,
             "HITL_TASK_QUEUE": task_queue, "HITL_WORKSPACE": str(folder / "workspace")})
    try:
        banner = await asyncio.wait_for(printed_until(process, "worker: model: "), 120)
        assert "worker: model: a scripted model: 2 replies from script.json" in banner, banner
        session = await HitlClient(client, task_queue).start("refund order A-17")
        await asyncio.wait_for(session.settled(), 60)
        [item] = await session.pending()
        assert (item.tool, item.args) == ("refund_payment", {"order_id": "A-17", "amount": 250})
        await session.approve(item.call_id, by="ana")
        assert (await asyncio.wait_for(session.settled(), 60)).last_answer == "Refunded."
        results = [m["content"] for m in await session.transcript() if m["role"] == "tool"]
        assert results == ["Refunded 250.00 on order A-17."], results
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)


async def printed_until(process: asyncio.subprocess.Process, text: str) -> str:
    """What the process printed up to and including the first line holding `text`."""
    assert process.stdout is not None
    printed = ""
    while text not in printed:
        line = await process.stdout.readline()
        if not line:
            raise AssertionError(f"the worker ended before it printed {text!r}:\n{printed}")
        printed += line.decode()
    return printed
