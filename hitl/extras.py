"""The optional doors and the pip extra each comes in (pyproject.toml, `[project.optional-dependencies]`).

The core install runs the worker, the CLI and the HTTP API with its web inbox. A
door's library is imported only where that door is configured; a door that is
configured while its extra is not installed stops the process at start with one
line naming the extra (`require`), never later, in the middle of a decision.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Extra:
    label: str  # what the one line calls it
    modules: tuple[str, ...]  # what it installs, as imported


EXTRAS: dict[str, Extra] = {
    "slack": Extra("Slack", ("slack_sdk",)),
    "mail": Extra("mail", ("aiosmtplib",)),
    "webhooks": Extra("signed webhooks", ("standardwebhooks",)),
    "sso": Extra("single sign-on", ("joserfc", "httpx")),
    "ag-ui": Extra("AG-UI", ("ag_ui",)),
    "a2a": Extra("A2A", ("a2a",)),
    "redis": Extra("Redis", ("redis",)),
}


class MissingExtra(ValueError):
    """A door is configured but its extra is not installed; the message is the one line to print."""


def installed(extra: str) -> bool:
    """Whether every module of `extra` can be imported here (found, not imported)."""
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[extra].modules)


def require(extra: str, for_setting: str) -> None:
    """Raise MissingExtra when `extra` is not installed; `for_setting` names what configured it."""
    if not installed(extra):
        raise MissingExtra(f"{for_setting} is set but {EXTRAS[extra].label} is not installed: "
                           f"pip install 'hitl-agent[{extra}]'")
