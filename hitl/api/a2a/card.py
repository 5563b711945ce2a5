"""The agent card other agents read at /.well-known/agent-card.json."""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HTTPAuthSecurityScheme, SecurityRequirement,
    SecurityScheme, StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

RPC_PATH = "/a2a"
BEARER = "bearer"


def agent_card(base_url: str) -> AgentCard:
    """The card for an API reached at `base_url`: JSON-RPC at POST /a2a, with the API's bearer tokens."""
    return AgentCard(
        name="hitl-agent",
        description="A durable human-in-the-loop agent on Temporal: a person, not the model, decides whether a "
                    "dangerous tool call runs. A task is a session; a pause is input-required with its card.",
        version="1",
        supported_interfaces=[AgentInterface(url=base_url.rstrip("/") + RPC_PATH,
                                             protocol_binding=TransportProtocol.JSONRPC.value,
                                             protocol_version=PROTOCOL_VERSION_CURRENT)],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        security_schemes={BEARER: SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="bearer", description="a token from HITL_API_TOKENS, as for every route of the API"))},
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(
            id="session", name="A session with a person in the loop",
            description='Send a task in text (a data part may carry the POST /sessions options). At a pause the '
                        'task is input-required with the card as a data part; decide it with a message on the '
                        'task carrying {"call_id", "decision": "approve" | "reject" | "answer", ...}.',
            tags=["human-in-the-loop", "approvals"],
        )],
    )
