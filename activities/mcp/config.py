"""HITL_MCP_CONFIG: the `mcpServers` file editors and chat clients already use.

Read once when the worker starts. A file that cannot be used stops the worker
there with one line that says which entry is wrong and why, rather than
leaving a server silently missing. Keys other clients add ("type",
"description", ...) are ignored, so the same file serves them all.
"""

from __future__ import annotations

import json
import os
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workflows.forms import describe_validation_error

CONFIG_VARIABLE = "HITL_MCP_CONFIG"
# Tool names are offered as mcp__<server>__<tool>; providers accept [A-Za-z0-9_-]{1,64}.
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class McpConfigError(ValueError):
    """A configuration file the worker cannot use; the message names the entry."""


class SandboxGrant(BaseModel):
    """What a sandboxed stdio server may see beyond a read-only minimal system (activities/mcp/sandbox.py)."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(default_factory=list)  # read and write
    read_only: list[str] = Field(default_factory=list)
    network: bool = False


class ServerEntry(BaseModel):
    """One server: started by `command` (stdio) or reached at `url` (streamable HTTP).

    `trusted` says whether its tool annotations may decide anything (MCP spec:
    annotations from an untrusted server are hints, never grounds for a
    decision). The pattern lists take names or fnmatch globs (case-sensitive),
    of the tool's own name or its offered `mcp__<server>__<tool>`."""

    model_config = ConfigDict(extra="ignore")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    trusted: bool = False
    auto_approve: list[str] = Field(default_factory=list)
    require_approval: list[str] = Field(default_factory=list)
    idempotent: list[str] = Field(default_factory=list)  # may be sent again after an interrupted call
    sandbox: bool | SandboxGrant = True  # stdio only; False runs the server with the worker's view of the machine
    disabled: bool = False
    timeout_seconds: float = Field(default=100.0, gt=0, le=110)  # within the tool activity's 2 minutes

    @model_validator(mode="after")
    def one_transport(self) -> ServerEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (streamable HTTP), not both or neither")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, not {self.url!r}")
        grant = self.sandbox_grant if self.command is not None else None
        if grant is not None:
            relative = [path for path in (*grant.paths, *grant.read_only) if not path.startswith("/")]
            if relative:
                raise ValueError(f"sandbox paths must be absolute, not {', '.join(map(repr, relative))}")
            granted = [Path(path) for path in (*grant.paths, *grant.read_only)]
            if self.cwd is not None and not any(Path(self.cwd) == g or g in Path(self.cwd).parents for g in granted):
                raise ValueError(f"cwd {self.cwd!r} is not inside a path the sandbox grants (sandbox.paths or sandbox.read_only)")
        both = sorted(set(self.auto_approve) & set(self.require_approval))
        if both:
            raise ValueError(f"{', '.join(both)} cannot be in both auto_approve and require_approval")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "streamable HTTP"

    @property
    def sandbox_grant(self) -> SandboxGrant | None:
        """What the sandbox lets a stdio server see, or None when the entry opts out."""
        if self.sandbox is False:
            return None
        return self.sandbox if isinstance(self.sandbox, SandboxGrant) else SandboxGrant()

    def override_for(self, tool: str, offered_as: str) -> str | None:
        """"require" or "auto" when a pattern of this entry matches the tool; require_approval wins."""
        if _matches(self.require_approval, tool, offered_as):
            return "require"
        if _matches(self.auto_approve, tool, offered_as):
            return "auto"
        return None

    def says_idempotent(self, tool: str, offered_as: str) -> bool:
        return _matches(self.idempotent, tool, offered_as)

    def unmatched_patterns(self, tools: list[tuple[str, str]]) -> list[str]:
        """Each pattern that matches none of these (tool, offered name) pairs, as a warning."""
        return [f"{key} pattern {pattern!r} matches none of its {len(tools)} tools"
                for key in ("require_approval", "auto_approve", "idempotent")
                for pattern in getattr(self, key)
                if not any(_matches([pattern], tool, offered) for tool, offered in tools)]


def _matches(patterns: list[str], tool: str, offered_as: str) -> bool:
    return any(fnmatchcase(tool, pattern) or fnmatchcase(offered_as, pattern) for pattern in patterns)


def parse_config(document: Any) -> dict[str, ServerEntry]:
    """The enabled servers of an `mcpServers` document, by name."""
    if not isinstance(document, dict) or not isinstance(document.get("mcpServers"), dict):
        raise McpConfigError('the file must be a JSON object with an "mcpServers" object')
    servers: dict[str, ServerEntry] = {}
    for name, entry in document["mcpServers"].items():
        if not SERVER_NAME.match(name):
            raise McpConfigError(f"mcpServers.{name}: a server name is 1-40 letters, digits, _ or -")
        if not isinstance(entry, dict):
            raise McpConfigError(f"mcpServers.{name}: must be an object")
        try:
            parsed = ServerEntry.model_validate(entry)
        except ValidationError as error:
            why = describe_validation_error(error).replace("value: Value error, ", "")
            raise McpConfigError(f"mcpServers.{name}: {why}") from None
        if not parsed.disabled:
            servers[name] = parsed
    return servers


def load_config(path: Path) -> dict[str, ServerEntry]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise McpConfigError(f"{CONFIG_VARIABLE}={path}: cannot read it ({error.strerror})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise McpConfigError(f"{CONFIG_VARIABLE}={path}: not JSON ({error})") from None
    try:
        return parse_config(document)
    except McpConfigError as error:
        raise McpConfigError(f"{CONFIG_VARIABLE}={path}: {error}") from None


def config_from_env(environ: Mapping[str, str] = os.environ) -> dict[str, ServerEntry]:
    """The configured servers, or none when HITL_MCP_CONFIG is unset."""
    path = environ.get(CONFIG_VARIABLE, "").strip()
    return load_config(Path(path)) if path else {}
