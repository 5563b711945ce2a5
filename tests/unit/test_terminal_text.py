"""What a person may be shown: someone else's text reaches a terminal with nothing in it that the
terminal obeys or hides instead of showing (hitl/control_characters.py).

A control character (category Cc) moves the cursor or erases a line; a format character (Cf) is
invisible: bidi marks, embeddings, overrides and isolates reorder what the eye reads (an approver
reads `delete ‮txt.sgnitteS` the wrong way round), zero-width spaces and joiners make two names look
the same. Each is written out as an escape; newline and tab are the only ones left as they are.
"""

from __future__ import annotations

import json
import sys
import unicodedata

from hypothesis import given, strategies as st

from hitl.console.render import json_line
from hitl.control_characters import shown

EVERY_CONTROL_OR_FORMAT = [chr(code) for code in range(sys.maxunicode + 1)
                           if unicodedata.category(chr(code)) in ("Cc", "Cf") and chr(code) not in "\n\t"]
NAMED_IN_THE_ISSUE = "\u200e\u200f\u061c\u200b\u200c\u200d\u2060\ufeff\u202a\u202e\u2066\u2069"


# Control and format characters, and what else a terminal cannot show as itself: lone surrogates, and
# the line and paragraph separators that would break a line a reader was told is one.
NEVER_SHOWN_AS_IS = ("Cc", "Cf", "Cs", "Zl", "Zp")


def invisible_in(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in NEVER_SHOWN_AS_IS and c not in "\n\t"]


def escapes_of(character: str) -> set[str]:
    code = ord(character)
    return {f"\\x{code:02x}", f"\\u{code:04x}", f"\\U{code:08x}"}


def is_subsequence(wanted: list[str], text: str) -> bool:
    rest = iter(text)
    return all(character in rest for character in wanted)


def test_every_control_and_format_character_is_shown_as_an_escape() -> None:
    assert set(NAMED_IN_THE_ISSUE) <= set(EVERY_CONTROL_OR_FORMAT)
    for character in EVERY_CONTROL_OR_FORMAT:
        written = shown(f"a{character}b")
        assert invisible_in(written) == [], f"U+{ord(character):04X} reaches the terminal as it is"
        assert written.startswith("a\\") and written.endswith("b"), written


@given(st.text(st.one_of(st.characters(categories=["Cc", "Cf"]), st.characters(), st.sampled_from(NAMED_IN_THE_ISSUE))))
def test_what_a_terminal_prints_holds_no_invisible_character_and_keeps_the_rest(text: str) -> None:
    written = shown(text)
    assert invisible_in(written) == []
    assert written.count("\n") == text.count("\n")  # lines stay lines
    assert is_subsequence([c for c in text if not invisible_in(c)], written)  # nothing visible is lost
    for character in invisible_in(text):
        assert any(escape in written for escape in escapes_of(character))  # each one named by its code point
    if not invisible_in(text):
        assert written == text  # ordinary text, Chinese, emoji and accents pass untouched


@given(st.text(st.one_of(st.characters(categories=["Cc", "Cf"]), st.characters(codec="utf-8"))))
def test_json_for_a_terminal_stays_the_same_json_with_every_invisible_character_escaped(text: str) -> None:
    line = json_line({"text": text})
    assert invisible_in(line) == []
    assert json.loads(line) == {"text": text}
