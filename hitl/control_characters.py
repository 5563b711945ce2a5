"""Someone else's text, as a terminal or a log line should show it: invisible characters written out.

A tool result or an MCP server's stderr with `\\x1b[1A\\x1b[2K` would erase the line above it;
`shown` writes such characters as escapes instead of letting the terminal obey them. Here, not
in the terminal package, because the worker's MCP supervisor needs it too (tests/unit/test_layers.py).

What a person is never shown as it is (tests/unit/test_terminal_text.py): control characters but
newline and tab (Unicode category Cc); every format character (Cf), which a terminal does not draw
but obeys or hides: bidi marks, embeddings, overrides and isolates (U+200E, U+200F, U+061C,
U+202A-U+202E, U+2066-U+2069) reorder what the eye reads, and zero-width spaces, joiners and the
byte order mark (U+200B-U+200D, U+2060, U+FEFF) make two different names look alike; the line and
paragraph separators (Zl, Zp), which break a line the reader was told is one; and lone surrogates
(Cs), which no terminal can print. An emoji joined by U+200D therefore shows its joiner: the price
of never showing a person something other than what is there.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Callable

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Printable ASCII, newline and tab are never hidden: only the rest is looked up, one character at a time.
_MAYBE_HIDDEN = re.compile("[^\t\n\x20-\x7e]")


def is_hidden(character: str) -> bool:
    """A character a terminal obeys or hides instead of showing it."""
    return character not in "\t\n" and unicodedata.category(character) in HIDDEN_CATEGORIES


def written_out(text: str, escape: Callable[[str], str]) -> str:
    """`text` with each hidden character replaced by `escape(character)`."""
    return _MAYBE_HIDDEN.sub(lambda match: escape(match.group()) if is_hidden(match.group()) else match.group(), text)


def shown(text: Any) -> str:
    """`text` as a terminal should show it: hidden characters written out (`\\x1b`, `\\u200e`), not obeyed."""
    return written_out(str(text), _escape)


def shown_in_json(text: str) -> str:
    """JSON text with each hidden character as a JSON escape (`\\u200e`; a surrogate pair past U+FFFF),
    so it stays the same JSON."""
    return written_out(text, lambda character: json.dumps(character)[1:-1])


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
