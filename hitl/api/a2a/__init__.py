"""A2A (agent to agent) on the API: the agent card, and JSON-RPC at POST /a2a.

The a2a-sdk's JSON-RPC dispatcher parses and answers the protocol; the routes
here authenticate first, with the same bearer tokens as every other route
(`caller`), and hand the dispatcher the request and its person, which the
handler (hitl/api/a2a/handler.py) passes to the API's own paths.

Internal: not a public API, and it may change in any release. Programs import only the
public face, `hitl` (its `__all__`: tool, ToolContext, ToolError, HitlClient, Session,
Refused, HitlPlugin, and `hitl.testing`); docs/architecture.md, "The public face".
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from fastapi import APIRouter, Depends, Request, Response

from hitl.api.a2a.card import RPC_PATH, agent_card
from hitl.api.a2a.handler import SessionsAsTasks
from hitl.api.auth import caller

router = APIRouter(tags=["a2a"])


class CallerContext(DefaultServerCallContextBuilder):
    """The call context with the request and the person its token names."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["request"] = request
        context.state["person"] = request.state.person
        return context


DISPATCHER = JsonRpcDispatcher(SessionsAsTasks(), CallerContext())


@router.get(AGENT_CARD_WELL_KNOWN_PATH)
async def card(request: Request) -> dict[str, Any]:
    """The agent card (public, as A2A expects): the JSON-RPC endpoint and its bearer scheme."""
    return agent_card_to_dict(agent_card(str(request.base_url)))


@router.post(RPC_PATH)
async def rpc(request: Request, person: str = Depends(caller)) -> Response:
    """A2A JSON-RPC (protocol 1.0): SendMessage, GetTask, CancelTask, as the token's person."""
    request.state.person = person
    return await DISPATCHER.handle_requests(request)
