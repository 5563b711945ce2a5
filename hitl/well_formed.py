"""Text as UTF-8 can carry it: lone surrogates replaced by U+FFFD.

JSON may escape half of a UTF-16 pair (`"\\ud800"`) and Python parses it into a str that
no UTF-8 encoder accepts, so a model reply, a tool server's result or an error message
holding one could not be stored in a Temporal payload. Replaced here, such text is an
ordinary (odd) answer the model can read and correct. Here, not in activities/, because
the worker's activity interceptor and the MCP adapter both need it.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a str holds no paired ones)."""
    return LONE_SURROGATE.sub(REPLACEMENT, text)


def is_well_formed(text: str) -> bool:
    return LONE_SURROGATE.search(text) is None
