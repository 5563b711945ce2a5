"""Who may decide, when a call needs a person, and decisions that are remembered.

Session input carries these rules; the workflow resolves them onto each
pending call when it opens, so the decision function only reads the call.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field

from workflows.limits import MAX_RULE_ENTRIES, Name, ReminderSeconds, Seconds

ANY_TOOL = "*"
People = Annotated[list[Name], Field(max_length=MAX_RULE_ENTRIES)]
ApprovalCount = Annotated[int, Field(ge=1, le=20)]


def args_sha256(args: dict[str, Any]) -> str:
    """A stable fingerprint of arguments: what a person saw is what runs."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class DecisionRules(BaseModel):
    """The part of a session's input that governs decisions."""

    model_config = ConfigDict(extra="forbid")

    approvers: Annotated[dict[Name, People], Field(max_length=MAX_RULE_ENTRIES)] | None = None
    required_approvals: Annotated[dict[Name, ApprovalCount], Field(max_length=MAX_RULE_ENTRIES)] | None = None
    four_eyes: bool = False
    auto_approve: People = Field(default_factory=list)
    require_approval: People = Field(default_factory=list)
    remind_after_seconds: ReminderSeconds | None = None
    escalate_after_seconds: Seconds | None = None
    escalate_to: People = Field(default_factory=list)

    def approvers_for(self, tool: str) -> list[str] | None:
        if not self.approvers:
            return None
        listed = self.approvers.get(tool, self.approvers.get(ANY_TOOL))
        return list(listed) if listed is not None else None

    def approvals_needed(self, tool: str) -> int:
        needed = self.required_approvals or {}
        return max(1, needed.get(tool, needed.get(ANY_TOOL, 1)))

    def tools_named(self) -> dict[str, list[str]]:
        """The tool names (or patterns) each rule that names tools lists, ANY_TOOL included."""
        return {
            "approvers": list(self.approvers or {}), "required_approvals": list(self.required_approvals or {}),
            "auto_approve": self.auto_approve, "require_approval": self.require_approval,
        }

    def name_a_tool(self) -> bool:
        """Whether a rule names a tool other than ANY_TOOL: only such a name can be unknown."""
        return any(set(tools) - {ANY_TOOL} for tools in self.tools_named().values())

    def unknown_tools(self, known_tools: set[str]) -> list[str]:
        """Rules that name a tool the worker does not have (a typo would silently weaken them)."""
        problems = []
        for rule, tools in self.tools_named().items():
            unknown = sorted(name for name in set(tools) - {ANY_TOOL} if not _names_a_tool(name, known_tools))
            if unknown:
                problems.append(f"{rule}: no tool named {', '.join(map(repr, unknown))}")
        return problems

    def rule_problems(self) -> list[str]:
        """Rules nobody could satisfy: refused at start rather than left to wedge a call."""
        problems = []
        for tool, people in (self.approvers or {}).items():
            if not people:
                problems.append(f"approvers: nobody may decide {tool!r}")
        for tool, count in (self.required_approvals or {}).items():
            listed = self.approvers_for(tool)
            if listed is not None and count > len(set(listed) | set(self.escalate_to)):
                problems.append(f"required_approvals: {tool!r} needs {count} approvals but only {len(set(listed))} people may approve it")
        return problems

    def policy_for(self, tool: str) -> Literal["require", "auto"] | None:
        """Per-session overrides beside the tool's own flag (names or globs); requiring wins."""
        if any(fnmatchcase(tool, entry) for entry in self.require_approval):
            return "require"
        if any(fnmatchcase(tool, entry) for entry in self.auto_approve):
            return "auto"
        return None


def _names_a_tool(entry: str, known_tools: set[str]) -> bool:
    """A rule's entry names a tool, or is a glob that matches one (a typo would silently weaken it)."""
    return entry in known_tools or any(fnmatchcase(tool, entry) for tool in known_tools)


class Remember(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: Literal["tool", "same_args"]
    for_seconds: Seconds


class Grant(BaseModel):
    """A remembered approval: later matching calls run without asking again."""

    tool: str
    args_sha256: str | None
    until: datetime
    by: str | None
    call_id: str
    scope: Literal["tool", "same_args"]
    # Whose request it was given for: it covers later calls led to by the same person only.
    requested_by: str | None = None

    def covers(self, tool: str, sha: str, now: datetime) -> bool:
        return tool == self.tool and now < self.until and self.args_sha256 in (None, sha)

    def describe(self) -> str:
        who = self.by or "a person"
        return f"remembered approval by {who} on {self.call_id} (scope {self.scope}) until {self.until.isoformat()}"


def grant_from(remember: Remember, tool: str, sha: str, by: str | None, call_id: str, now: datetime,
               requested_by: str | None = None) -> Grant:
    return Grant(
        requested_by=requested_by,
        tool=tool,
        args_sha256=sha if remember.scope == "same_args" else None,
        until=now + timedelta(seconds=remember.for_seconds),
        by=by,
        call_id=call_id,
        scope=remember.scope,
    )
