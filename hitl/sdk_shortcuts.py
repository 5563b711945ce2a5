"""The settings that turn off the places the product relies on the SDK's insides for speed.

Each is on unless its variable says `off` (docs/production.md, "The SDK's insides"):
`HITL_CONTEXT_FREE_SANDBOX` (hitl/sandbox_runner.py) and `HITL_QUERY_BUFFER_RETRY`
(hitl/client/queries.py). Off, the worker or client does what the SDK does by itself: the
way out when an SDK upgrade changes what they rely on.
"""

from __future__ import annotations

import os
from typing import Mapping

CONTEXT_FREE_SANDBOX = "HITL_CONTEXT_FREE_SANDBOX"
QUERY_BUFFER_RETRY = "HITL_QUERY_BUFFER_RETRY"
SETTINGS = (CONTEXT_FREE_SANDBOX, QUERY_BUFFER_RETRY)
SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


class ShortcutSettingError(ValueError):
    """A setting that is neither on nor off; the message is the one line to print."""


def enabled(name: str, environ: Mapping[str, str] = os.environ) -> bool:
    value = environ.get(name, "").strip().lower() or "on"
    if value not in SWITCH:
        raise ShortcutSettingError(f"{name} must be on or off, not {value!r}")
    return SWITCH[value]


def check_settings(environ: Mapping[str, str] = os.environ) -> None:
    """Raise ShortcutSettingError for the first of the settings that is neither on nor off."""
    for name in SETTINGS:
        enabled(name, environ)
