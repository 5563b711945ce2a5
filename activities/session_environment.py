"""The local activity that tells a starting run what its worker knows.

Both answers depend on the world outside the workflow (the server's
registered search attributes, the keys an operator configured), so they are
recorded in history when a run starts, and a replay sees the same answers.
"""

from __future__ import annotations

import logging
import time

from temporalio import activity
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from hitl import decision_keys
from activities.tools import CATALOG
from workflows.agents import AgentsError, agents_from_env
from workflows.contract import SESSION_ENVIRONMENT, SESSION_FACTS, WORKFLOW
from workflows.policy import PolicyError, policy_from_env
from workflows.requests import FactsRequest, SessionFacts
from workflows.visibility import SEARCH_ATTRIBUTE_NAMES

CACHE_SECONDS = 30.0
PASSING_TROUBLE = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED,
                   RPCStatusCode.ABORTED, RPCStatusCode.INTERNAL, RPCStatusCode.UNKNOWN, RPCStatusCode.CANCELLED)
log = logging.getLogger(__name__)


class SessionEnvironment:
    def __init__(self, client: Client) -> None:
        self.client = client
        self._registered: tuple[float, list[str]] | None = None

    async def registered_search_attributes(self) -> list[str]:
        """Ours that the namespace has registered. Upserting one it has not would fail the
        workflow task for ever, so when the server cannot tell us, none are used."""
        if self._registered and time.monotonic() - self._registered[0] < CACHE_SECONDS:
            return self._registered[1]
        try:
            response = await self.client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=self.client.namespace)
            )
        except Exception as error:  # noqa: BLE001 - a server that will not say is a server we do not upsert to
            log.warning("cannot list search attributes (%s); sessions will not publish them", error)
            return []
        known = set(response.custom_attributes) | set(response.system_attributes)
        registered = [name for name in SEARCH_ATTRIBUTE_NAMES if name in known]
        missing = sorted(set(SEARCH_ATTRIBUTE_NAMES) - set(registered))
        if missing:
            log.warning("search attributes not registered: %s (see docs/production.md, 'Finding waiting sessions on your own server')", ", ".join(missing))
        self._registered = (time.monotonic(), registered)
        return registered

    async def carried_problem(self, continued_from: str) -> str | None:
        """Why the state a run starts with is not this product's own hand-over, or None.

        Any workflow may continue as new into AgentWorkflow on this queue with any input, so the
        carried state counts only when the server's record of the run it continued from says
        that run was an AgentWorkflow on this worker's task queue (whose commands only this
        product's workers write) and that it ended by continuing as new. The session and the
        queue are the activity's own (a local activity: it runs in the worker of the run that
        asks), never the request's."""
        info = activity.info()
        assert info.workflow_id is not None  # a local activity: always a workflow's
        try:
            earlier = await self.client.get_workflow_handle(info.workflow_id, run_id=continued_from).describe()
        except RPCError as error:
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                return f"the run it continued from ({continued_from}) is unknown to the server"
            if error.status in PASSING_TROUBLE:
                raise  # retried, as any local activity
            # Refused for good (say, an authorizer that lets the worker describe nothing): a clear end,
            # not a session that retries its start for ever.
            return f"the server would not say which run it continued from ({error.status.name if error.status else error})"
        if earlier.workflow_type != WORKFLOW or earlier.task_queue != info.task_queue:
            return (f"it was handed over by a {earlier.workflow_type!r} run on task queue {earlier.task_queue!r}, "
                    f"not by a session of this product ({WORKFLOW!r} on {info.task_queue!r})")
        if earlier.status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
            return f"the run it continued from did not continue as new ({earlier.status.name if earlier.status else 'running'})"
        return None

    @activity.defn(name=SESSION_ENVIRONMENT.name)
    async def session_environment(self, verified_decisions: bool) -> SessionFacts:
        return SessionFacts(
            registered_search_attributes=await self.registered_search_attributes(),
            trusted_keys=decision_keys.trusted_keys() if verified_decisions else {},
        )

    @activity.defn(name=SESSION_FACTS.name)
    async def session_facts(self, request: FactsRequest) -> SessionFacts:
        """What session_environment says, and what in the session's input the operator's policy
        refuses (a session's rules may only add to the policy)."""
        facts = await self.session_environment(request.verified_decisions)
        if request.continued_from is not None:
            facts.carried_problem = await self.carried_problem(request.continued_from)
            facts.carried_proven = facts.carried_problem is None
        try:
            facts.agents = agents_from_env()
        except AgentsError as error:  # the worker checked it as it started: changed since
            return facts.model_copy(update={"policy_problems": [f"the operator's agents cannot be read: {error}"]})
        try:
            policy = policy_from_env()
        except PolicyError as error:
            return facts.model_copy(update={"policy_problems": [f"the operator's policy cannot be read: {error}"]})
        if policy is not None:
            facts.policy_problems = policy.loosened_by(request.rules, CATALOG.names())
        return facts
