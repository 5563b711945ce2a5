"""A session as an A2A task: its state, its pauses as cards, its answer as an artifact.

The task id and the context id are both the session id: a session is one
conversation (A2A's context) and one unit of work (its task) at once, and a
further message on the task is the session's next turn.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_message, new_text_part
from a2a.types.a2a_pb2 import Artifact, Part, Role, Task, TaskState, TaskStatus
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from hitl.client.consequences import with_consequences

# The card's fields a deciding agent needs (hitl/api/sessions.py's `pending` answers all of them).
CARD_FIELDS = ("call_id", "kind", "tool", "args", "args_sha256", "question", "choices", "fields", "result",
               "deadline", "because", "approvers", "required_approvals", "approvals", "four_eyes",
               "requested_by", "approving", "at_deadline", "claimed_by", "claim_until")
SESSION_PEOPLE = "the session's owner, participants and operators"


def task_of(session_id: str, status: dict[str, Any], pending: list[dict[str, Any]], cancelled: bool = False) -> Task:
    """The task the session is now, from its `status` and `pending` answers."""
    state, said = state_of(status, pending, cancelled)
    parts = [new_text_part(said)] + [new_data_part(card_of(item, status)) for item in pending]
    task = Task(id=session_id, context_id=session_id, status=TaskStatus(
        state=state, message=new_message(parts, context_id=session_id, task_id=session_id, role=Role.ROLE_AGENT)))
    if status.get("last_answer") and state in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED):
        task.artifacts.append(Artifact(artifact_id=f"{session_id}-answer-{status.get('turn', 0)}", name="answer",
                                       parts=[Part(text=status["last_answer"])]))
    return task


def decision_task(session_id: str, decided: dict[str, Any]) -> Task:
    """What a decision answers someone who may decide a call of the task's children but not read
    the task (a child's approver): the decision's outcome, nothing else of the session."""
    said = f"{decided.get('call_id')}: {decided.get('outcome') or 'accepted'}"
    return Task(id=session_id, context_id=session_id, status=TaskStatus(
        state=TaskState.TASK_STATE_WORKING,
        message=new_message([new_text_part(said)], context_id=session_id, task_id=session_id, role=Role.ROLE_AGENT)))


def state_of(status: dict[str, Any], pending: list[dict[str, Any]], cancelled: bool) -> tuple[TaskState, str]:
    """The task's state and one line saying it."""
    state = status.get("state")
    if cancelled or (state == "closed" and str(status.get("closed_reason") or "").startswith("cancelled")):
        # "cancelled..." is how the workflow words a close it was asked for (workflows/agent.py)
        return TaskState.TASK_STATE_CANCELED, f"cancelled: {status.get('closed_reason') or 'on request'}"
    if state == "awaiting_human" and pending:
        tools = ", ".join(f"{item['tool']} ({item['call_id']})" for item in pending)
        return TaskState.TASK_STATE_INPUT_REQUIRED, f"waits for a person to decide: {tools}"
    if state == "running" or state == "awaiting_human":
        return TaskState.TASK_STATE_WORKING, "working"
    if status.get("error"):
        return TaskState.TASK_STATE_FAILED, str(status["error"])
    if state == "closed":
        return TaskState.TASK_STATE_COMPLETED, f"closed: {status.get('closed_reason') or 'closed'}"
    return TaskState.TASK_STATE_COMPLETED, str(status.get("last_answer") or "")


def card_of(item: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """One pause as the data part a deciding agent reads; `who_may_decide` names the approvers, or
    says the session's own people decide a call that names none (hitl/access.py); `approving`
    and `at_deadline` say what each choice does, as GET /sessions/{id}/pending does."""
    item = with_consequences(item)
    card = {name: item[name] for name in CARD_FIELDS if item.get(name) is not None}
    card["who_may_decide"] = item.get("approvers") or f"{SESSION_PEOPLE} (owner: {status.get('owner')})"
    return card


def data_of(part: Part) -> Any:
    """A data part as JSON, whole numbers as integers (a protobuf Value holds every number as a
    double: an edited `{"count": 3}` would reach the tool's schema as 3.0)."""
    return whole(MessageToDict(part.data) if isinstance(part.data, struct_pb2.Value) else None)


def whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [whole(inner) for inner in value]
    return value
