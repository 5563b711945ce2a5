"""Show that the agent is working: a spinner, the seconds since the turn began, the step and the tool.

With a real model a step takes seconds; a terminal that shows nothing looks
stuck. `WorkingIndicator` draws one transient line with `rich` while the session
runs and removes it when the session waits for someone or answers; lines printed
meanwhile (with print()) appear above it. When stdout is not a terminal (a pipe,
a log, a test) it draws nothing, so the output stays plain text.

`Activity` reads what the agent is doing from the session's events
(hitl/client/events.py) and its `status` query, the stream the API's SSE shares.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.markup import escape
from rich.text import Text

from hitl.client.events import SessionEvent
from hitl.console.render import shown


@dataclass
class Activity:
    """What the session is doing, as its events and status tell it."""

    state: str = "running"
    turn: int = 0
    step: int = 0
    tool: str | None = None  # the call being run or last settled, while the turn goes on
    doing: str = "thinking"
    retrying: str | None = None  # "the model: retrying (attempt 3)", while a call keeps failing
    tools_by_call: dict[str, str] = field(default_factory=dict)

    def read_status(self, status: dict[str, Any]) -> None:
        self.state, self.turn, self.step = status["state"], status.get("turn", 0), status.get("steps", 0)

    def read_event(self, event: SessionEvent) -> None:
        data = event.data
        if event.type == "state":
            self.state = data.get("state", self.state)
            if self.state == "running":
                self.doing = "thinking"
        elif event.type == "pause_opened":
            self.tools_by_call[data.get("call_id", "")] = data.get("tool", "")
            self.tool, self.doing = data.get("tool"), "waiting for a person"
        elif event.type == "pause_settled":
            self.tool = data.get("tool") or self.tools_by_call.get(data.get("call_id", ""), self.tool)
            running = data.get("outcome") in ("approved", "edited")
            self.doing = f"running {self.tool}" if running and self.tool else "thinking"
        elif event.type == "tool_result":
            self.tool, self.doing = data.get("tool"), "thinking"
        elif event.type in ("message", "answer"):
            self.doing = "thinking"

    @property
    def working(self) -> bool:
        return self.state == "running"

    def line(self) -> str:
        if self.retrying:
            return f"{self.retrying} · turn {self.turn}, step {self.step}"
        where = f"turn {self.turn}, step {self.step}" if self.turn else f"step {self.step}"
        last = f" · last tool {self.tool}" if self.tool and not self.doing.startswith("running") else ""
        return f"{self.doing} · {where}{last}"


def spoken(line: str) -> str:
    """The line with control characters shown (a tool's name is the server's choice), as rich markup text."""
    return escape(shown(line))


class SecondsColumn(ProgressColumn):
    """Elapsed seconds with a tenth: a step of a few seconds should visibly tick."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.elapsed or 0:.1f}s", style="progress.elapsed")


class WorkingIndicator:
    """One transient spinner line while the session works; nothing at all when stdout is not a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.console = Console(file=stream or sys.stdout)
        self.progress: Progress | None = None
        self.task: Any = None

    @property
    def enabled(self) -> bool:
        return self.console.is_terminal

    def show(self, activity: Activity) -> None:
        """Start, refresh or stop the line to match what the session is doing."""
        if not self.enabled:
            return
        if not activity.working:
            self.stop()
            return
        if self.progress is None:
            self.progress = Progress(SpinnerColumn(), TextColumn("[bold]agent[/bold] {task.description}"),
                                     SecondsColumn(), console=self.console, transient=True)
            self.task = self.progress.add_task(spoken(activity.line()), total=None)
            self.progress.start()
        else:
            self.progress.update(self.task, description=spoken(activity.line()))

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def __enter__(self) -> WorkingIndicator:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
