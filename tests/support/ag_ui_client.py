"""The official AG-UI client (`@ag-ui/client`'s HttpAgent, from tests/js) driving a thread of the API,
run after run, through tests/js/ag_ui_run.mjs: what it saw, one `Run` per step."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.api_server import Api, token_of

DRIVER = Path(__file__).resolve().parents[1] / "js" / "ag_ui_run.mjs"


@dataclass
class Run:
    """One run as the client saw it: its events, and how it ended."""

    events: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    pending: list[dict[str, Any]] = field(default_factory=list)  # the interrupts the client holds after it
    failed: str | None = None

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        [finished] = self.of_type("RUN_FINISHED")
        return (finished.get("outcome") or {}).get("interrupts") or []

    @property
    def error(self) -> str:
        [error] = self.of_type("RUN_ERROR")
        return str(error["message"])

    def custom(self, name: str) -> list[Any]:
        return [event["value"] for event in self.of_type("CUSTOM") if event["name"] == name]


def step(person: str, **todo: Any) -> dict[str, Any]:
    """A run as `person`: `message="..."`, `resume={"status", "payload"}` for every pending
    interrupt, or `entries=[...]` as they are."""
    return {"token": token_of(person), **todo}


async def drive(api: Api, thread_id: str, *steps: dict[str, Any]) -> list[Run]:
    if not (DRIVER.parent / "node_modules" / "@ag-ui" / "client").is_dir():
        raise RuntimeError("the AG-UI client is not installed: run ./scripts/js-peers.sh")
    spec = {"url": f"{api.base}/ag-ui", "threadId": thread_id, "steps": list(steps)}
    process = await asyncio.create_subprocess_exec(
        "node", str(DRIVER), json.dumps(spec), cwd=DRIVER.parent,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 240)
    assert process.returncode == 0, err.decode()
    runs = [Run() for _ in steps]
    for line in out.decode().splitlines():
        seen = json.loads(line)
        run = runs[seen["step"]]
        if "event" in seen:
            run.events.append(seen["event"])
        elif "failed" in seen:
            run.failed = seen["failed"]
        else:
            run.finished, run.pending = True, seen["pending"]
    return runs
