"""Every bound on what callers and models may hand a session, in one place.

Temporal counts bytes (2 MB a payload, 50 MB and 51,200 events a run), so
sizes here are UTF-8 bytes, never characters: a Chinese character is three.
Each bound is far above honest use and far below what could wedge a session.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Callable, Mapping

from pydantic import AfterValidator, Field

MAX_TEXT_BYTES = 100_000  # a message, an answer, a system prompt
MAX_NOTE_BYTES = 10_000  # a reason or a comment on a decision
MAX_NAME_BYTES = 200  # a call id, a person's name, a tool name
MAX_ARGUMENT_BYTES = 32_768  # one tool call's arguments, as the model or an approver sends them
MAX_CALLS_PER_REPLY = 16  # tool calls taken from one model reply; more are refused to the model
MAX_QUEUED_BYTES = 300_000  # messages waiting for the next step boundary, together
MAX_DURATION_SECONDS = 366 * 86400  # timeouts, reminders, remembered decisions: at most a year
MIN_REMINDER_SECONDS = 1.0
MAX_RULE_ENTRIES = 100  # tools or people named in one rule list
MAX_JSON_DEPTH = 64  # levels of nesting in a request body (hitl/api/json_bodies.py); the worker's parser stops at 200

MAX_PROOF_BYTES = 2_000  # a decision proof (workflows/proofs.py)
RECORDED_BYTES = 300  # how much of a refused value the audit keeps
MODEL_WINDOW_BYTES = 400_000  # messages sent to the model per call: ~100k tokens, under the 512 KB payload warning
CARRY_BUDGET_BYTES = 1_500_000  # what a run hands the next one when it continues as new
AUDIT_CARRIED = 200  # newest audit events carried; older ones stay readable in earlier runs


# Half of a UTF-16 pair, alone: JSON may escape one (`"\ud800"`) and Python parses it into a str that no
# UTF-8 encoder, and so no payload, accepts. A str holds no paired ones.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def well_formed(text: str) -> str:
    """`text` as UTF-8 can carry it: every lone surrogate replaced by U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


def is_well_formed(text: str) -> bool:
    return LONE_SURROGATE.search(text) is None


def json_well_formed(text: str) -> str:
    """JSON text whose strings, once parsed, hold no lone surrogate: `text` itself when they hold
    none (or it is not JSON), else its value written again with U+FFFD for each."""
    if not ESCAPED_SURROGATE.search(text):
        return text
    try:
        written = json.dumps(json.loads(text), ensure_ascii=False)
    except (ValueError, RecursionError):
        return text
    return text if is_well_formed(written) else well_formed(written)


def utf8_size(text: str | None) -> int:
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


def json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8", "surrogatepass"))


def clip(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` that fits in `max_bytes`, cut on a character boundary."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", "ignore") + f"… [{len(encoded) - max_bytes} more bytes]"


def _at_most(max_bytes: int, measure: Callable[[Any], int] = utf8_size, encoded: str = "") -> Callable[[Any], Any]:
    """A validator: the value's encoded size, not its character count, within `max_bytes`."""

    def check(value: Any) -> Any:
        size = measure(value)
        if size > max_bytes:
            raise ValueError(f"is {size} bytes{encoded}; at most {max_bytes} are accepted")
        return value

    return check


def within_json_bytes(max_bytes: int) -> Callable[[Any], Any]:
    """A validator for any JSON value, measured as JSON."""
    return _at_most(max_bytes, json_size, " as JSON")


Name = Annotated[str, AfterValidator(_at_most(MAX_NAME_BYTES))]
Note = Annotated[str, AfterValidator(_at_most(MAX_NOTE_BYTES))]
Text = Annotated[str, Field(min_length=1), AfterValidator(_at_most(MAX_TEXT_BYTES))]
Seconds = Annotated[float, Field(gt=0, le=MAX_DURATION_SECONDS, allow_inf_nan=False)]
ReminderSeconds = Annotated[float, Field(ge=MIN_REMINDER_SECONDS, le=MAX_DURATION_SECONDS, allow_inf_nan=False)]
Proof = Annotated[str, AfterValidator(_at_most(MAX_PROOF_BYTES))]


# What the payload codec hands on for a payload it cannot open (hitl/encryption.py): refused by
# the session like any malformed payload, with the codec's reason, never a failed workflow task.
UNREADABLE_ENCODING = b"binary/unreadable-encrypted"
UNREADABLE_REASON = "unreadable-reason"


def unreadable_reason(metadata: Mapping[str, bytes]) -> str | None:
    """Why the codec could not open a payload (clipped for the record), or None when it could."""
    if metadata.get("encoding") != UNREADABLE_ENCODING:
        return None
    return clip(metadata.get(UNREADABLE_REASON, b"").decode(errors="replace"), RECORDED_BYTES)
