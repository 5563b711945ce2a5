"""Approval of an MCP tool: the server entry decides; annotations only where the entry trusts them.

Annotations (readOnlyHint, destructiveHint, idempotentHint) are what someone
else's program says about itself. The MCP specification: clients must treat
them as untrusted unless they come from a trusted server. So they decide only
for an entry with `"trusted": true`: there a tool marked read-only runs without
asking. For every other server each tool needs approval; its hints are still
shown (a pending item's `destructive`) and recorded (`hints`), never obeyed.
`require_approval` and `auto_approve` (names or globs) have the last word,
`require_approval` first.

Whether an interrupted call may be sent again (activities/mcp/toolbox.py) is
the entry's `idempotent` when it names the tool; a hint counts only on a
trusted server and only for a tool that runs without asking: a person's
approval is never spent twice on the strength of a hint.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp import types

from activities.mcp.config import ServerEntry
from workflows.policy import PolicyError, policy_from_env


@dataclass(frozen=True)
class McpPolicy:
    needs_approval: bool
    destructive: bool
    repeatable: bool  # safe to send again when an earlier try may have reached the server
    rule: str | None = None  # why it runs without asking, when a setting says so
    hints: str = ""  # what the server claims, in words ("read-only, idempotent"), trusted or not
    why: str = ""  # why it needs approval or not, for `starter.py tools`


def hints_of(tool: types.Tool) -> str:
    hints = tool.annotations or types.ToolAnnotations()
    said = [word for word, flag in (("read-only", hints.read_only_hint), ("destructive", hints.destructive_hint),
                                     ("idempotent", hints.idempotent_hint), ("open-world", hints.open_world_hint))
            if flag is True]
    return ", ".join(said)


def policy_for(server: str, entry: ServerEntry, tool: types.Tool, offered_as: str) -> McpPolicy:
    hints = tool.annotations or types.ToolAnnotations()
    read_only = hints.read_only_hint is True
    destructive = not read_only and hints.destructive_hint is True  # shown to the approver, trusted or not
    claimed = hints_of(tool)
    trusted = entry.trusted or policy_trusts(server)
    override = entry.override_for(tool.name, offered_as)
    if override == "require":
        needs, rule, why = True, None, f"require_approval of MCP server {server}"
    elif override == "auto":
        needs, rule, why = False, f"auto_approve of MCP server {server}", f"auto_approve of MCP server {server}"
    elif trusted:
        needs = not read_only
        rule = f"readOnlyHint of trusted MCP server {server}" if not needs else None
        why = rule or f"trusted MCP server {server} does not mark it read-only"
    else:
        needs, rule, why = True, None, f"MCP server {server} is not trusted: its hints are not obeyed"
    if entry.says_idempotent(tool.name, offered_as):
        repeatable = True
    else:
        repeatable = trusted and not needs and (read_only or hints.idempotent_hint is True)
    return McpPolicy(needs, destructive, repeatable, rule=rule, hints=claimed, why=why)


def policy_trusts(server: str) -> bool:
    """Whether the operator's policy, as its file says now, trusts the server (a policy that cannot
    be read trusts none)."""
    try:
        policy = policy_from_env()
    except PolicyError:
        return False
    return policy is not None and policy.trusts_mcp_server(server)
