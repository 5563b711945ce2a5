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
from temporalio.client import Client

from hitl import decision_keys
from activities.tools import CATALOG
from workflows.contract import SESSION_ENVIRONMENT, SESSION_FACTS
from workflows.policy import PolicyError, policy_from_env
from workflows.requests import FactsRequest, SessionFacts
from workflows.visibility import SEARCH_ATTRIBUTE_NAMES

CACHE_SECONDS = 30.0
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
        try:
            policy = policy_from_env()
        except PolicyError as error:
            return facts.model_copy(update={"policy_problems": [f"the operator's policy cannot be read: {error}"]})
        if policy is not None:
            facts.policy_problems = policy.loosened_by(request.rules, CATALOG.names())
        return facts
