"""hitl: the public Python face, and the product below its top level.

What programs and tests import, and nothing else (docs/interface.md, "Building on it"):

    from hitl import tool, ToolContext, ToolError, HitlClient, Session, HitlPlugin, Refused
    from hitl.testing import Harness

`tool` registers a typed function as a tool, `ToolContext` is what a tool may ask for, `ToolError`
a refusal the model reads; `HitlClient` drives sessions, `Session` is its handle on one, `Refused`
is a decision it refused; `HitlPlugin` is the product's workflow and sandbox for a worker of your own.

Below it, internal (not a public API, and it may change in any release): configuration
(`settings`), the payload codec (`encryption`), decision keys, the embedded dev server, the tool
catalog, the worker (`hitl.worker`), the command line (`hitl.cli`), the terminal (`console`) and
the HTTP API (`api`). `workflows/`, `activities/`, `worker.py` and `starter.py` stay at the top,
internal too.

The names are imported when first used, not here: workflow code imports `hitl.catalog` inside
the sandbox, and importing the package must not pull the client, the API or the terminal in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from activities.tools.errors import ToolError
    from hitl.catalog import ToolContext, tool
    from hitl.client.python_client import HitlClient, Session
    from hitl.client.refusals import Refused
    from hitl.plugin import HitlPlugin

__all__ = ["tool", "ToolContext", "ToolError", "HitlClient", "Session", "Refused", "HitlPlugin", "testing"]

# Where each public name lives.
_PUBLIC = {
    "tool": "hitl.catalog",
    "ToolContext": "hitl.catalog",
    "ToolError": "activities.tools.errors",
    "HitlClient": "hitl.client.python_client",
    "Session": "hitl.client.python_client",
    "Refused": "hitl.client.refusals",
    "HitlPlugin": "hitl.plugin",
}


def __getattr__(name: str) -> Any:
    if name == "testing":
        return importlib.import_module("hitl.testing")
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hitl' has no attribute {name!r}")
