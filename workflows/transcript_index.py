"""A run's transcript by reference: what a reader needs to rebuild it from the run's own history.

A session that continued as new keeps older transcript pages in the runs that
held them, and answering a query about a closed run makes a worker replay its
whole history (seconds per run). Yet nearly every byte of the transcript is
already in that history: model replies and tool results are activity results,
messages and answers are signal or Update inputs, the carried tail is the start
input. So when a run hands over it records, once, its messages with every long
string replaced by its SHA-256 (`{"#sha256": ...}`); short strings (roles,
ids, the product's own notes) stay as they are. A reader decodes the
run's payloads, hashes their strings and puts each long one back
(hitl/client/run_history.py), with no replay. A string it cannot find (one the
workflow composed, such as a framed answer) makes it ask the run's queries
instead, so the result is always exactly what the queries give.

The index weighs about 100 bytes a message plus its strings under 512 bytes,
recorded once per run (a local activity's result, activities/transcript_index.py):
history still grows with new content only, not with a copy of the transcript.
"""

from __future__ import annotations

import hashlib
from typing import Any

from workflows.conversation import ChatMessage
from workflows.limits import json_size

REF_KEY = "#sha256"
REF_MIN_BYTES = 512  # strings this long or longer are referenced; shorter ones (ids, notes, most texts the
# workflow composes itself, which no payload holds verbatim) are kept as they are
INDEX_MAX_BYTES = 1_000_000  # beside the carried state in the hand-over's workflow task; larger: no index


def string_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def referenced(value: Any) -> Any:
    """The value with every string of REF_MIN_BYTES or more replaced by a reference to it."""
    if isinstance(value, str):
        return {REF_KEY: string_sha256(value)} if len(value.encode("utf-8", "surrogatepass")) >= REF_MIN_BYTES else value
    if isinstance(value, dict):
        return {key: referenced(item) for key, item in value.items()}
    if isinstance(value, list):
        return [referenced(item) for item in value]
    return value


def transcript_index(first_index: int, messages: list[ChatMessage]) -> dict[str, Any] | None:
    """The run's messages (as `transcript_page` answers them) by reference; None when too large to record."""
    index = {"first_index": first_index, "messages": [referenced(message.to_openai()) for message in messages]}
    return index if json_size(index) <= INDEX_MAX_BYTES else None


class Unresolved(LookupError):
    """A referenced string is in none of the run's payloads."""


def resolved(value: Any, strings: dict[str, str]) -> Any:
    """The value with every reference replaced by the string it names (from `strings`, by SHA-256)."""
    if isinstance(value, dict):
        if set(value) == {REF_KEY}:
            try:
                return strings[value[REF_KEY]]
            except KeyError:
                raise Unresolved(value[REF_KEY]) from None
        return {key: resolved(item, strings) for key, item in value.items()}
    if isinstance(value, list):
        return [resolved(item, strings) for item in value]
    return value


def long_strings(value: Any, into: dict[str, str]) -> None:
    """Every string of REF_MIN_BYTES or more inside a decoded payload, by its SHA-256."""
    if isinstance(value, str):
        if len(value) >= REF_MIN_BYTES // 4 and len(value.encode("utf-8", "surrogatepass")) >= REF_MIN_BYTES:
            into[string_sha256(value)] = value
    elif isinstance(value, dict):
        for item in value.values():
            long_strings(item, into)
    elif isinstance(value, (list, tuple)):
        for item in value:
            long_strings(item, into)
