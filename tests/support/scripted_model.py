"""A scripted model for long turns, shared by the benchmark and the long-session tests.

It calls one tool on every step, writing `text_bytes` of text each time, and
answers at step `steps`. It reads its position from the newest assistant
message (the newest messages always reach the model whole), so it needs no
state of its own to follow a turn that continued as new. It also times itself:
the benchmark subtracts the model's own time from each step's wall time to get
what the orchestration costs.

Asked "delegate <agent>: <task>", it hands the task to that agent instead
(`delegation_reply`, the sub-agent tests' sentence too): the root's part; the
child, asked the task, plays the long turn.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass

from activities.offline_model import read_turn
from workflows.conversation import ChatMessage, FunctionCall, ModelReply, ToolCall
from workflows.requests import ModelRequest

STEP = re.compile(r"^step (\d+)\b")
OMITTED = re.compile(r"^\[(\d+) earlier messages")
DELEGATE = "delegate "


def delegation_reply(messages: list[ChatMessage]) -> ModelReply | None:
    """The reply to "delegate <agent>: <task> || <agent>: <task>": every agent's `delegate__<agent>`
    called in one reply, then, once the answers are in, the answers said; None for any other request."""
    turn = read_turn(messages)
    if turn is None or not turn.request.startswith(DELEGATE):
        return None
    if turn.steps:
        return ModelReply(content=" | ".join(f"{step.name}: {step.result}" for step in turn.steps))
    calls = []
    for index, part in enumerate(turn.request.removeprefix(DELEGATE).split("||")):
        name, task = (piece.strip() for piece in part.split(":", 1))
        calls.append(ToolCall(id=f"call_d{turn.calls_so_far + index + 1}", function=FunctionCall(
            name=f"delegate__{name}", arguments=json.dumps({"task": task}))))
    return ModelReply(tool_calls=calls)


def fingerprint(message: dict) -> str:
    return hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class ModelCall:
    """One call as the model saw it: when it began (perf_counter) and how long it took."""

    step: int
    started: float
    seconds: float


class LongTurnModel:
    """Calls a tool on every step of a long turn, writing `text_bytes` each time, then answers.

    With `remember_requests` it keeps a fingerprint of every whole message it
    was sent, to compare with the transcript afterwards (the tests do; the
    benchmark does not need to).
    """

    description = "a scripted model for long turns"

    def __init__(self, steps: int, text_bytes: int, tool_name: str = "search_web", remember_requests: bool = True) -> None:
        self.steps, self.text_bytes, self.tool_name = steps, text_bytes, tool_name
        self.remember_requests = remember_requests
        self.seen: list[tuple[int, list[str]]] = []
        self.calls: list[ModelCall] = []
        self.requests = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.perf_counter()
        self.requests += 1
        if self.remember_requests:
            self.remember(request)
        delegating = delegation_reply(request.messages)
        if delegating is not None:  # the root's part: step 1 hands the task over, step 2 answers
            self.calls.append(ModelCall(1 if delegating.tool_calls else 2, started, time.perf_counter() - started))
            return delegating
        last = next((m for m in reversed(request.messages) if m.role == "assistant"), None)
        done = int(STEP.match(last.content).group(1)) if last is not None and request.messages[-1].role == "tool" else 0
        step = done + 1
        reply = self.reply_for(step)
        self.calls.append(ModelCall(step, started, time.perf_counter() - started))
        return reply

    def reply_for(self, step: int) -> ModelReply:
        if step >= self.steps:
            return ModelReply(content=f"step {step}: finished after {step} steps.")
        text = f"step {step} " + "w" * (self.text_bytes - 12)
        args = {"query": f"step {step}"} if self.tool_name == "search_web" else {"step": step}
        return ModelReply(content=text, tool_calls=[
            ToolCall(id=f"call_{step}", function=FunctionCall(name=self.tool_name, arguments=json.dumps(args)))
        ])

    def remember(self, request: ModelRequest) -> None:
        messages = request.messages[1:]  # after the system prompt
        omitted = OMITTED.match(messages[0].content or "") if messages[0].role == "user" else None
        if omitted:
            messages = messages[1:]
        self.seen.append((int(omitted.group(1)) if omitted else 0, [fingerprint(m.to_openai()) for m in messages]))
