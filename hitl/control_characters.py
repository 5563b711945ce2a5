"""Someone else's text, as a terminal or a log line should show it: control characters written out.

A tool result or an MCP server's stderr with `\\x1b[1A\\x1b[2K` would erase the line above it;
`shown` writes such characters as escapes instead of letting the terminal obey them. Here, not
in the terminal package, because the worker's MCP supervisor needs it too (tests/unit/test_layers.py).
"""

from __future__ import annotations

import re
from typing import Any

# C0 but newline and tab, DEL, C1, and the bidi embeddings, overrides and isolates.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: Any) -> str:
    """`text` as a terminal should show it: control characters written out (`\\x1b`), not obeyed."""
    return CONTROL.sub(lambda match: _escape(match.group()), str(text))


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
