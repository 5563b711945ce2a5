"""A worker's memory of the conversations its model calls read, so the common step needs no query.

The workflow hands the model activity a `ConversationRef`: the run, how many
messages, and the end of the hash chain over them (workflows/conversation.py,
`message_sha256`). Reading them through the `model_context` query costs a round
trip through the server and a workflow activation on the worker that holds the
session, on every step: the most expensive thing a busy worker did besides
running workflows (docs/evidence.md, "Many sessions at once").

Yet a step's new messages are, in the common case, the model's own reply and
the tools' outputs, and this worker produced both. So it remembers, per run,
the messages its last model call read and the reply it returned, and each
tool's output (`remember_tool_output`, called by the tool activity). The next
call's conversation is that, plus the reply as the workflow records it, plus
one result per call; it is taken only when its hash chain ends exactly where
the reference says, and when the model's window would send it whole. Anything
else (a renamed call id, a refusal, a person's answer or message, a tool run
by another worker, a run that continued as new, a conversation past the
window) is a miss, and a miss asks the workflow as before. The model sees
exactly the messages the workflow meant; the history still records each
message once; nothing here decides what a call may do (the worker's judgement
does, workflows/planning.py), it only saves reading what the workflow holds.

Bounded: the newest RUNS_KEPT runs and TOOL_OUTPUTS_KEPT outputs, and within
RUN_BYTES_KEPT and TOOL_OUTPUT_BYTES_KEPT (without the byte bounds, a worker's
memory grew to 2 GB: 20,000 outputs of 64 KB, 2,000 windows of 400 KB); a
conversation heavier than the model's window is not kept (it is windowed, and
the workflow knows how).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from hitl.catalog import CATALOG
from workflows.conversation import ChatMessage, Conversation, ModelReply, message_bytes, message_sha256
from workflows.limits import MODEL_WINDOW_BYTES
from workflows.requests import ConversationRef, ModelRequest

RUNS_KEPT = 2_000
TOOL_OUTPUTS_KEPT = 20_000
RUN_BYTES_KEPT = 256_000_000  # the messages kept, as message_bytes counts them
TOOL_OUTPUT_BYTES_KEPT = 64_000_000  # a thousand outputs at the tool activity's limit

Key = TypeVar("Key")
Value = TypeVar("Value")


class Newest(Generic[Key, Value]):
    """A dict that forgets its least recently used entries past `size` entries or `budget` bytes
    (each entry weighing what it was put with)."""

    def __init__(self, size: int, budget: int | None = None) -> None:
        self.size, self.budget = size, budget
        self.entries: OrderedDict[Key, Value] = OrderedDict()
        self.weights: dict[Key, int] = {}
        self.weight = 0

    def get(self, key: Key) -> Value | None:
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: Key, value: Value, weight: int = 0) -> None:
        self.pop(key)
        self.entries[key] = value
        self.weights[key] = weight
        self.weight += weight
        while len(self.entries) > self.size or (self.budget is not None and self.weight > self.budget and len(self.entries) > 1):
            oldest, _ = self.entries.popitem(last=False)
            self.weight -= self.weights.pop(oldest)

    def pop(self, key: Key) -> None:
        if self.entries.pop(key, None) is not None:
            self.weight -= self.weights.pop(key)


@dataclass(frozen=True)
class Known:
    """A run's conversation as this worker's last model call read it, and what that call returned."""

    messages: list[ChatMessage]  # the run's first len(messages) messages, whole
    chain: str  # the hash chain's end over them
    system: ChatMessage
    tools: list[str] | None  # the tools offered, by name; None: every tool of the catalog
    reply: ModelReply | None = None
    # The catalog's names when the tools were read. Which tools a session is offered depends on
    # what it named and what the catalog has: one that named every tool is indistinguishable from
    # one that named none, and one that named a tool the catalog lacked is offered it once an MCP
    # server adds it. Only the query knows, so any change of the catalog is a miss.
    catalog: tuple[str, ...] = ()


def chain_after(previous: str, messages: list[ChatMessage]) -> str:
    for message in messages:
        previous = message_sha256(previous, message)
    return previous


class ConversationCache:
    def __init__(self, runs: int = RUNS_KEPT, tool_outputs: int = TOOL_OUTPUTS_KEPT,
                 run_bytes: int = RUN_BYTES_KEPT, tool_output_bytes: int = TOOL_OUTPUT_BYTES_KEPT) -> None:
        self.runs: Newest[tuple[str, str], Known] = Newest(runs, run_bytes)
        self.tool_outputs: Newest[tuple[str, str], str] = Newest(tool_outputs, tool_output_bytes)
        self.hits = self.misses = 0

    def remember_tool_output(self, session_id: str, call_id: str, output: str) -> None:
        self.tool_outputs.put((session_id, call_id), output, len(output.encode("utf-8", "surrogatepass")))

    def request_for(self, reference: ConversationRef) -> ModelRequest | None:
        """The request the reference names, from memory; None when memory cannot vouch for it."""
        known = self.runs.get((reference.session_id, reference.run_id))
        if known is not None and tuple(CATALOG.names()) != known.catalog:
            known = None
        messages = self.messages_for(reference, known) if known is not None else None
        if known is None or messages is None:
            self.misses += 1
            return None
        self.hits += 1
        specs = CATALOG.select(known.tools)  # the tools as the catalog has them now, as the query reads them
        return ModelRequest(messages=[known.system, *messages], tools=[spec.openai_schema() for spec in specs],
                            model=reference.model)

    def messages_for(self, reference: ConversationRef, known: Known) -> list[ChatMessage] | None:
        if len(known.messages) == reference.message_count:  # the same call again (a retry)
            return known.messages if known.chain == reference.prefix_sha256 else None
        if known.reply is None or len(known.messages) > reference.message_count:
            return None
        new = [Conversation.assistant_message(known.reply)]
        for call in known.reply.tool_calls:
            output = self.tool_outputs.get((reference.session_id, call.id))
            if output is None:
                return None
            new.append(Conversation.tool_result(call.id, output))
        messages = [*known.messages, *new]
        if len(messages) != reference.message_count or chain_after(known.chain, new) != reference.prefix_sha256:
            return None
        return messages if sends_whole(messages) else None

    def remember(self, reference: ConversationRef, request: ModelRequest, reply: ModelReply, checked: bool) -> None:
        """What a call read and returned. A request memory did not give (`checked` False: the
        workflow's answer to the query) is kept only when its messages are exactly the
        reference's prefix, whole: a windowed view, or one that starts with the note of a run
        that continued as new, never matches, and that run asks the workflow every time."""
        system, messages = request.messages[0], request.messages[1:]
        key = (reference.session_id, reference.run_id)
        if not checked and (system.role != "system" or len(messages) != reference.message_count
                            or chain_after("", messages) != reference.prefix_sha256 or not sends_whole(messages)):
            self.runs.pop(key)
            return
        every = [spec.name for spec in CATALOG.select(None)]
        offered = [tool["function"]["name"] for tool in request.tools]
        self.runs.put(key, Known(messages, reference.prefix_sha256, system, None if offered == every else offered, reply,
                                 tuple(every)), weight_of(messages))


def weight_of(messages: list[ChatMessage]) -> int:
    return sum(message_bytes(message) for message in messages)


def sends_whole(messages: list[ChatMessage]) -> bool:
    """Whether the model's window (AgentWorkflow.model_context) would send these messages as they are."""
    return weight_of(messages) <= MODEL_WINDOW_BYTES


CACHE = ConversationCache()  # one per worker process: the tool activity and the model activity share it
