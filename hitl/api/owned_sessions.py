"""How many running sessions one person may own through the API (`HITL_API_SESSIONS_PER_PERSON`).

Every session is a worker's load for as long as it runs (a model call per
turn, a tool per call, a week idle before it closes), so one token may not
start them without end: past the limit, `POST /sessions` answers 429 naming it.
The count is Temporal's, not this process's: the running sessions on this API's
task queue whose `hitl_session` memo names the person as owner (one visibility
list; memos are not searchable, so each listed session's memo is read, as the
inbox does). Visibility lags a start by a moment, so the sessions this process
started count too until the list shows them, and one person's starts are
counted one at a time: forty at once cannot all slip under the limit.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

from fastapi import HTTPException
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from hitl.api.inbox import SESSION_MEMO, memo_of
from hitl.api.reading import setting
from hitl.client.inbox import escaped, executions
from workflows.contract import WORKFLOW

DEFAULT_LIMIT = 20


@dataclass
class SessionsPerPerson:
    """At most `limit` running sessions owned by one person, counted before each start."""

    limit: int
    setting: str = "HITL_API_SESSIONS_PER_PERSON"
    starting: dict[str, set[str]] = field(default_factory=dict)  # person -> ids whose start is under way
    unlisted: dict[str, set[str]] = field(default_factory=dict)  # person -> ids started here, not yet listed
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> SessionsPerPerson:
        return cls(setting("HITL_API_SESSIONS_PER_PERSON", DEFAULT_LIMIT))

    @asynccontextmanager
    async def start(self, client: Client, task_queue: str, person: str, session_id: str) -> AsyncIterator[None]:
        """Around the start of `session_id`: 429 if the person already owns `limit` running sessions;
        it counts as theirs from now on, unless the start fails."""
        async with self.locks.setdefault(person, asyncio.Lock()):
            owned = await self.running(client, task_queue, person)
            if len(owned) >= self.limit:
                raise HTTPException(429, f"{person} already owns {self.limit} running sessions, the most one person "
                                         f"may ({self.setting}); cancel one or wait for one to close")
            self.starting.setdefault(person, set()).add(session_id)
        try:
            yield
        except BaseException:
            self.starting[person].discard(session_id)
            raise
        self.starting[person].discard(session_id)
        self.unlisted.setdefault(person, set()).add(session_id)

    async def running(self, client: Client, task_queue: str, person: str) -> set[str]:
        """The person's running sessions: those the visibility list shows, those starting, and those
        started here that the list does not show yet (each described: the list lags, a describe does not)."""
        listed = {session async for session in owned_and_running(client, task_queue, person)}
        unlisted = self.unlisted.setdefault(person, set())
        for session_id in list(unlisted):
            if session_id in listed or not await is_running(client, session_id):
                unlisted.discard(session_id)
        return listed | unlisted | self.starting.get(person, set())


async def is_running(client: Client, session_id: str) -> bool:
    try:
        description = await client.get_workflow_handle(session_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return description.status == WorkflowExecutionStatus.RUNNING


async def owned_and_running(client: Client, task_queue: str, person: str) -> AsyncIterator[str]:
    """The ids of the running sessions on `task_queue` whose memo names `person` as owner."""
    query = f'WorkflowType = "{WORKFLOW}" AND ExecutionStatus = "Running" AND TaskQueue = "{escaped(task_queue)}"'
    async for execution in executions(client, query):
        memo = await memo_of(client, execution.memo.fields.get(SESSION_MEMO))
        if isinstance(memo, dict) and memo.get("owner") == person:
            yield execution.execution.workflow_id

