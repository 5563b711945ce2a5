"""What the parts of AgentWorkflow share: the one list of their per-run state and of the calls one part makes on another.

AgentWorkflow (workflows/agent.py) is the loop and nine mixins, one job a
module, that read each other's attributes and call each other's methods.
Every part derives from `AgentParts`, so a reader following a decision from a
handler finds here what `self.signal_or_record` is and which module defines
it, and the type checker (tests/unit/test_type_check.py) holds every part to
these declarations: a typo in a rarely replayed branch fails the check, not a
task in production.

Declarations only: nothing here exists at run time (annotations without
values, methods under TYPE_CHECKING), so the class, its handlers and what a
replay decides are exactly the mixins'. What outlives a run is `run_state`
(workflows/handover.py); the rest is this run's alone and set in
AgentWorkflow.__init__.
"""

from __future__ import annotations

from datetime import datetime
import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, TypeVar

if TYPE_CHECKING:  # declarations only; the mixins' modules import this one
    from temporalio.common import RawValue

    from hitl.catalog import ToolSpec
    from workflows.agents import AgentSpec, ForwardedToChild
    from workflows.contract import SessionStatus
    from workflows.handover import RunState
    from workflows.patches import Behaviours
    from workflows.session import AuditEventKind, CancelRequest, SessionInput, SessionState, UserMessage
    from workflows.visibility import Publisher
    from workflows.conversation import ChatMessage, Conversation
    from workflows.identity import RunCheck, SpentProof
    from workflows.pauses import ClaimVerdict, Outcome, PauseKind, Settlement, Verdict
    from workflows.planning import PlannedCall
    from workflows.rules import Grant

T = TypeVar("T")


class HistoryFigures(Protocol):
    """What the parts read of the history's figures (workflows/activity_calls.py's HistoryReading,
    which imports this module: named here by its shape, so no import goes back)."""

    @property
    def length(self) -> int: ...  # events
    @property
    def size(self) -> int: ...  # bytes


class AgentParts:
    """The surface every mixin of AgentWorkflow reads and writes; see the module's docstring."""

    # Set in AgentWorkflow.__init__ (workflows/agent.py).
    setup_error: str | None  # why the start input was refused (workflows/starting.py)
    config: SessionInput
    offered: dict[str, ToolSpec]  # the catalog's tools this session offered as the run started
    run_state: RunState  # all that continue-as-new carries to the next run
    chain: list[str]  # hash chain over this run's messages
    state: SessionState
    closed_reason: str | None
    notifications_in_flight: int
    notices_in_flight: dict[str, int]  # call id -> its notifications still being sent (a `settled` notice waits)
    tool_inputs_waiting: int  # tool calls waiting for a person to answer their MCP server (tool_input.py)
    hand_over_blocked: bool  # too much waits for people to hand over now
    handing_over: bool
    settled_event: int  # the event id at which the session last stopped running
    waiters: list[int]  # wait_until_settled calls still waiting, oldest first
    waiters_seen: int
    publisher: Publisher
    validating: bool  # inside an Update's validator, which may command nothing
    reusable_runs: dict[str, tuple[dict[str, Any], datetime]]  # tool -> (verdict, judged at)
    # Which side of each patch this run is on (workflows/patches.py), set in run().
    behaviours: Behaviours
    # A class default in LocalChecks (workflows/activity_calls.py), which alone keeps the history's figures.
    local_activities_in_flight: int
    # Sub-agents (workflows/delegating.py): this run's agents, and the signals to the rest of the tree.
    agents: dict[str, AgentSpec]
    reports_in_flight: int  # signals to other sessions of the tree not yet delivered
    last_report: list[dict[str, Any]]  # what a child last told its parent waits in it
    last_sent: asyncio.Future[None] | None  # the newest of those signals (sent in order)

    if TYPE_CHECKING:
        # The loop (workflows/agent.py).
        @property
        def conversation(self) -> Conversation: ...
        def append(self, message: ChatMessage) -> None: ...
        def add_tool_result(self, call_id: str, text: str) -> None: ...

        # What callers send, decided (workflows/inbound.py).
        def refuse_while_busy(self) -> None: ...
        def run_check(self, recording: bool) -> RunCheck: ...
        def decide(self, verb: str, payload: Any) -> tuple[Verdict, SpentProof | None]: ...
        def decide_and_apply(self, verb: str, payload: Any) -> dict[str, Any]: ...
        def judge_claim(self, verb: str, payload: Any) -> tuple[ClaimVerdict, SpentProof | None]: ...
        def hold(self, verb: str, payload: Any) -> dict[str, Any]: ...
        def parse_message(self, payload: Any) -> UserMessage: ...
        def receive_message(self, payload: Any) -> dict[str, Any]: ...
        def parse_cancel(self, payload: Any) -> CancelRequest: ...
        def request_cancel(self, payload: Any) -> dict[str, Any]: ...
        def signal_or_record(self, signal: str, payload: RawValue, handle: Callable[[Any], Any]) -> None: ...
        def validate(self, payload: RawValue, check: Callable[[Any], Any]) -> None: ...
        def update_or_fail(self, name: str, payload: RawValue,
                           handle: Callable[[Any], dict[str, Any]]) -> dict[str, Any]: ...

        # Pauses and their clocks (workflows/waiting.py).
        def settle_all(self, outcome: Outcome, why: str) -> None: ...
        def live_grants(self) -> list[Grant]: ...
        def notify_settled(self, settlement: Settlement) -> None: ...
        def request_person(self, kind: PauseKind, plan: PlannedCall, result: str | None = None,
                           asked: Any = None) -> None: ...  # asked: a tool server's question (tool_input.py)
        async def wait_for_people(self) -> None: ...

        # Continue-as-new (workflows/continuing.py).
        def history_is_long(self) -> bool: ...
        def should_hand_over(self) -> bool: ...
        async def hand_over_if_long(self) -> None: ...
        async def hand_over(self) -> None: ...

        # The one recorder (workflows/recorder.py).
        def publish_who(self) -> None: ...
        def set_state(self, state: SessionState) -> None: ...
        def publish(self) -> None: ...
        def record_settlement(self, settlement: Settlement, audit_via: str | None = None) -> None: ...
        def record(self, event: AuditEventKind, call_id: str | None = None, tool: str | None = None,
                   sha: str | None = None, **details: Any) -> None: ...

        # The queries (workflows/views.py).
        def status(self) -> SessionStatus: ...
        def pending(self) -> list[dict[str, Any]]: ...

        # Closing (workflows/closing.py).
        def close(self, reason: str) -> None: ...

        # Sub-agents (workflows/delegating.py).
        def delegates(self) -> dict[str, AgentSpec]: ...
        def learn_agents(self, operator: dict[str, AgentSpec]) -> None: ...
        def children_pending(self) -> list[dict[str, Any]]: ...
        def child_finished(self, child_id: str) -> None: ...
        def report_pauses(self) -> None: ...
        def refer_to_child(self, payload: Any) -> None: ...
        def forward(self, verb: str, payload: dict[str, Any], forwarded: ForwardedToChild) -> dict[str, Any]: ...

        # Local activities and the history's figures (workflows/activity_calls.py, LocalChecks).
        async def local_activity(self, name: str, arg: Any, **options: Any) -> Any: ...
        def history_reading(self) -> HistoryFigures: ...
        def history_moved_on(self) -> None: ...
        async def activity_outcome(self, call: Awaitable[T]) -> T: ...
