"""The operator's policy: the floor every session stands on, however it was started.

`HITL_POLICY` names a JSON file the operator controls (docs/policy.md). The API
reads it for who may start sessions and who operates them; the worker reads it
when it judges each tool call (a recorded local activity, so a replay sees the
verdict the policy gave then) and when a session starts, to refuse input that
would loosen it. A session's own rules may only add.

Pure: no I/O but `policy_from_env`, so the workflow, the API and the inbox
share one reading of it.
"""

from __future__ import annotations

import hashlib
import json
import os
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from workflows.agents import agent_of
from workflows.forms import describe_validation_error

ANYONE = "*"
# Stands for the output of more tools than a turn keeps track of (AgentWorkflow.output_entered).
MORE_TOOLS = "(more tools than the session keeps track of)"
Approval = Literal["always", "never", "tool"]


class PolicyError(ValueError):
    """A policy file that cannot be used; the message says which and why, in one line."""


class ToolRule(BaseModel):
    """What the operator says of the tools a key (a name or a glob) matches."""

    model_config = ConfigDict(extra="forbid")

    approval: Approval = "tool"
    approvers: list[str] | None = None  # people or @groups
    required_approvals: Annotated[int, Field(ge=1, le=20)] | None = None
    four_eyes: bool = False
    remember: bool = True
    # Whether people may hand their decisions on these tools to a stand-in (workflows/stand_ins.py);
    # unset: as the policy's own `delegation` says.
    delegation: bool | None = None


class SessionRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verified: Literal["required", "optional"] = "optional"
    may_start: list[str] = Field(default_factory=lambda: [ANYONE])


class WhenUntrusted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    require_approval: list[str] = Field(default_factory=list)


class ToolFloor(BaseModel):
    """The policy's word on one tool, resolved: what a planned call carries into its pause."""

    key: str
    approval: Approval = "tool"
    approvers: list[str] | None = None  # people, groups expanded
    required_approvals: int = 1
    four_eyes: bool = False
    remember: bool = True

    @property
    def names_deciders(self) -> bool:
        """Approvers, a count, four eyes or no remembering: whoever starts a session, when the
        tool runs these people decide (no session's auto_approve waives it)."""
        return self.approvers is not None or self.required_approvals > 1 or self.four_eyes or not self.remember

    @property
    def binds_approval(self) -> bool:
        """No session rule may waive approval of this tool (where the policy says "never", there is none to waive)."""
        return self.approval == "always" or (self.approval != "never" and self.names_deciders)

    @property
    def line(self) -> str:
        return f"operator policy tools.{self.key}"


class RubberStamp(BaseModel):
    """When a person's approvals in a period look unread (hitl/client/decision_stats.py): at least
    `min_decisions` decisions, approving at least `approve_rate` of them, in `median_seconds` or less."""

    model_config = ConfigDict(extra="forbid")

    min_decisions: Annotated[int, Field(ge=1, le=1_000_000)] = 20
    approve_rate: Annotated[float, Field(ge=0, le=1)] = 0.95
    median_seconds: Annotated[float, Field(ge=0, le=86_400)] = 10


class OperatorPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Which file's text this is (SHA-256 of its bytes), recorded with each verdict so an auditor
    # can tell which version of the policy applied to a call (hitl/evidence).
    _version: str | None = PrivateAttr(default=None)

    @property
    def version(self) -> str | None:
        return self._version

    groups: dict[str, list[str]] = Field(default_factory=dict)
    operators: list[str] = Field(default_factory=list)
    sessions: SessionRule = Field(default_factory=SessionRule)
    tools: dict[str, ToolRule] = Field(default_factory=dict)
    untrusted_output: list[str] = Field(default_factory=list)
    when_untrusted: WhenUntrusted = Field(default_factory=WhenUntrusted)
    # MCP servers (names or globs of HITL_MCP_CONFIG's entries) whose annotations decide, as an
    # entry's own `"trusted": true` would (docs/mcp.md): the operator's word, not the server's.
    trusted_mcp_servers: list[str] = Field(default_factory=list)
    # Tool definitions an operator accepted (tool name -> sha256 prefixes, at least 16 hex digits, as
    # a pending item shows them): running sessions that pinned an earlier definition take this one.
    accepted_definitions: dict[str, list[Annotated[str, Field(min_length=16, max_length=64)]]] = Field(default_factory=dict)
    # The groups an OpenID provider vouches for (the API's bearer JWTs, hitl/api/oidc.py) count as
    # the policy's own: `@payments` also means whoever's token says they are in "payments". A call's
    # approvers then keep the policy's group names beside their members, for the session to match.
    groups_from_identity: bool = False
    rubber_stamp: RubberStamp = Field(default_factory=RubberStamp)
    # Whether people may hand their decisions to a stand-in while away (POST /people/me/delegations),
    # on every tool; a tool's own `delegation` says otherwise for it.
    delegation: bool = False

    # ------------------------------------------------------------ people

    def expand(self, names: Iterable[str]) -> set[str]:
        """People and @groups as people (groups may name groups; a cycle ends where it repeats)."""
        people: set[str] = set()
        seen: set[str] = set()
        pending = list(names)
        while pending:
            name = pending.pop()
            if not name.startswith("@"):
                people.add(name)
            elif name not in seen:
                seen.add(name)
                pending.extend(self.groups.get(name[1:], []))
        return people

    def as_seen_by(self, person: str, groups: Iterable[str]) -> OperatorPolicy:
        """The policy for a person whose identity provider vouches for `groups`: they are in each
        (when the policy takes groups from identity), so every rule that names a group sees them."""
        if not self.groups_from_identity or not groups:
            return self
        merged = {name: list(members) for name, members in self.groups.items()}
        for group in groups:
            merged.setdefault(group, []).append(person)
        return self.model_copy(update={"groups": merged})

    def groups_of(self, person: str) -> list[str]:
        """The groups `person` is in, directly or through another group."""
        return [group for group in sorted(self.groups) if person in self.expand([f"@{group}"])]

    def is_operator(self, person: str | None) -> bool:
        return person is not None and person in self.expand(self.operators)

    def knows(self, person: str) -> bool:
        """Whether the policy names the person: in a group, as an operator, an approver or a starter."""
        named = [f"@{group}" for group in self.groups] + self.operators + self.sessions.may_start
        for rule in self.tools.values():
            named += rule.approvers or []
        return person != ANYONE and person in self.expand(named)

    def allows_delegation(self, tool: str) -> bool:
        """Whether a stand-in may decide `tool` for someone (a tool's own word first)."""
        found = self.rule_for(tool)
        own = found[1].delegation if found is not None else None
        return self.delegation if own is None else own

    def may_start(self, person: str | None) -> bool:
        allowed = self.sessions.may_start
        return ANYONE in allowed or (person is not None and person in self.expand(allowed))

    # ------------------------------------------------------------- tools

    def rule_for(self, tool: str) -> tuple[str, ToolRule] | None:
        """The rule a tool falls under: its own name first, else the most specific glob."""
        if tool in self.tools:
            return tool, self.tools[tool]
        matching = [key for key in self.tools if fnmatchcase(tool, key)]
        if not matching:
            return None
        key = max(matching, key=lambda key: (len(key.replace("*", "").replace("?", "")), key))
        return key, self.tools[key]

    def floor_for(self, tool: str) -> ToolFloor | None:
        found = self.rule_for(tool)
        if found is None:
            return None
        key, rule = found
        return ToolFloor(
            key=key, approval=rule.approval, required_approvals=rule.required_approvals or 1,
            approvers=sorted(self.approvers_of(rule.approvers)) if rule.approvers is not None else None,
            four_eyes=rule.four_eyes, remember=rule.remember,
        )

    def approvers_of(self, names: Iterable[str]) -> set[str]:
        """A rule's approvers as a call carries them: people, and with groups from identity the
        rule's group names too (members the provider vouches for are known only as they decide,
        by the groups their proof carries: hitl/api/calls.py)."""
        names = list(names)
        named_groups = {name for name in names if name.startswith("@")} if self.groups_from_identity else set()
        return self.expand(names) | named_groups

    def first_untrusted(self, results: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
        """The first (tool, call id) whose output the policy does not trust (any it cannot tell). A
        sub-agent's answer is its child's output, which may carry what the child's untrusted tools
        read: this session cannot tell, so a delegation counts as untrusted output too."""
        return next(((tool, call_id) for tool, call_id in results
                     if matches(tool, self.untrusted_output)
                     or ((tool == MORE_TOOLS or agent_of(tool) is not None) and self.untrusted_output)), None)

    def accepts_definition(self, tool: str, sha256: str) -> bool:
        return any(sha256.startswith(prefix.lower()) for prefix in self.accepted_definitions.get(tool, []))

    def trusts_mcp_server(self, server: str) -> bool:
        return matches(server, self.trusted_mcp_servers)

    def needs_approval_when_untrusted(self, tool: str) -> bool:
        return matches(tool, self.when_untrusted.require_approval)

    # ----------------------------------------------------- session input

    def loosened_by(self, session: dict[str, Any], known_tools: Iterable[str] = ()) -> list[str]:
        """What a session's input would loosen; each problem names the key and the policy."""
        problems: list[str] = []
        tools = sorted(set(known_tools) | {key for key in self.tools if not _is_glob(key)})
        if not self.may_start(session.get("by")):
            problems.append(f"by: {session.get('by') or 'nobody named'} may not start sessions under the operator's "
                            "policy (sessions.may_start)")
        if self.sessions.verified == "required" and not session.get("verified_decisions"):
            problems.append("verified_decisions: the operator's policy requires verified sessions")
        for entry in session.get("auto_approve") or []:
            covered = [tool for tool in tools if fnmatchcase(tool, entry)] if entry != ANYONE else tools
            if entry == ANYONE:
                covered += [key for key in self.tools if _is_glob(key)]
            bound = [tool for tool in covered if (floor := self.floor_for(tool)) and floor.binds_approval]
            if bound:
                problems.append(f"auto_approve: {entry!r} covers {', '.join(bound)}, whose approval the operator's "
                                "policy binds (approval always, or who decides: approvers, required_approvals, "
                                "four_eyes, remember)")
        for tool, people in (session.get("approvers") or {}).items():
            for name in tools if tool == ANYONE else [tool]:
                floor = self.floor_for(name)
                if floor is None or floor.approvers is None:
                    continue
                outside = sorted(self.approvers_of(people) - set(floor.approvers))
                if outside:
                    problems.append(f"approvers: {', '.join(outside)} may not decide {name} under the operator's "
                                    f"policy ({floor.line})")
        escalated = self.approvers_of(session.get("escalate_to") or [])
        for name in tools:
            floor = self.floor_for(name)
            if floor is None or floor.approvers is None:
                continue
            outside = sorted(escalated - set(floor.approvers))
            if outside:
                problems.append(f"escalate_to: {', '.join(outside)} may not decide {name} under the operator's "
                                f"policy ({floor.line})")
        for tool, count in (session.get("required_approvals") or {}).items():
            for name in tools if tool == ANYONE else [tool]:
                floor = self.floor_for(name)
                if floor is not None and count < floor.required_approvals:
                    problems.append(f"required_approvals: {name} needs {floor.required_approvals} under the "
                                    f"operator's policy, not {count}")
        return problems


def matches(tool: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(tool, pattern) for pattern in patterns)


def _is_glob(key: str) -> bool:
    return any(char in key for char in "*?[")


def parse_policy(text: str, source: str = "HITL_POLICY") -> OperatorPolicy:
    try:
        policy = OperatorPolicy.model_validate(json.loads(text))
        policy._version = hashlib.sha256(text.encode()).hexdigest()
    except json.JSONDecodeError as error:
        raise PolicyError(f"{source}: not JSON: {error}") from None
    except ValidationError as error:
        raise PolicyError(f"{source}: {describe_validation_error(error)}") from None
    for key in policy.tools:
        floor = policy.floor_for(key)
        if floor and floor.approvers is not None and floor.required_approvals > len(floor.approvers):
            raise PolicyError(f"{source}: tools.{key} needs {floor.required_approvals} approvals but only "
                              f"{len(floor.approvers)} people may approve it")
        if floor and floor.approvers == []:
            raise PolicyError(f"{source}: tools.{key}: nobody may decide it (its approvers are empty)")
    return policy


def policy_from_env(environ: dict[str, str] | None = None) -> OperatorPolicy | None:
    """The policy `HITL_POLICY` names, read now; None without the variable."""
    path = (environ if environ is not None else os.environ).get("HITL_POLICY", "").strip()
    if not path:
        return None
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise PolicyError(f"HITL_POLICY={path}: cannot read it: {error.strerror or error}") from None
    return parse_policy(text, f"HITL_POLICY={path}")
