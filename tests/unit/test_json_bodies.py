"""The API's reading of request bodies (hitl/api/json_bodies.py), no server needed: every honest JSON
body passes as it was sent, and each kind of body no other part could carry is refused at its bound."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hitl.api.json_bodies import refusal_of
from workflows.limits import MAX_JSON_DEPTH

LARGEST = 2**63 - 1


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# Honest JSON, including what the quick screens look for inside strings: escapes spelled out,
# long runs of digits, exponents.
honest_text = st.one_of(st.text(max_size=30), st.sampled_from(["\\ud800", "12345678901234567890", "1e400", "😀"]))
honest_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-LARGEST, LARGEST), honest_text,
              st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(honest_text, inner, max_size=4)),
    max_leaves=30,
)


@settings(max_examples=300, derandomize=True, database=None)
@given(value=honest_json, ascii_only=st.booleans(), depth=st.integers(0, MAX_JSON_DEPTH - 3))
def test_any_honest_body_passes(value: Any, ascii_only: bool, depth: int) -> None:
    body = json.dumps(nested(depth) if depth else value, ensure_ascii=ascii_only).encode()
    assert refusal_of(body, "application/json") is None, body[:200]


@pytest.mark.parametrize("body, content_type, status, reason", [
    (b'{"a": 1}', "text/plain", 415, "must be JSON"),
    (b'{"a": "\xff"}', None, 422, "not UTF-8"),
    (b'{"a": ', "application/json", 422, "not JSON"),
    (b"[NaN]", "application/json", 422, "holds NaN"),
    (b"[-Infinity]", "application/json", 422, "holds -Infinity"),
    (b"[1e400]", "application/json", 422, "beyond a double's range"),
    (b"[" + b"1" * 400 + b".5]", "application/json", 422, "beyond a double's range"),
    (str(LARGEST + 1).encode(), "application/json", 422, "beyond 64 bits"),
    (str(-LARGEST - 1).encode(), "application/json", 422, "beyond 64 bits"),
    (b"9" * 5000, "application/json", 422, "beyond 64 bits"),
    (b'{"a": 1, "a": 2}', "application/json", 422, "names the key 'a' twice"),
    (b'["\\udfff"]', "application/json", 422, "lone surrogate ('\\udfff')"),
    (b'{"\\ud83d": 1}', "application/json", 422, "lone surrogate ('\\ud83d')"),
    (json.dumps(nested(MAX_JSON_DEPTH + 1)).encode(), "application/json", 422, f"nested deeper than {MAX_JSON_DEPTH}"),
    (b"[" * 100_000 + b"]" * 100_000, "application/json", 422, f"nested deeper than {MAX_JSON_DEPTH}"),
])
def test_each_body_no_other_part_could_carry_is_refused_with_its_reason(body: bytes, content_type: str | None,
                                                                       status: int, reason: str) -> None:
    refusal = refusal_of(body, content_type)
    assert refusal is not None and refusal.status_code == status and reason in refusal.detail, refusal
    assert "\n" not in refusal.detail and json.dumps(refusal.detail).isascii()


def test_the_bounds_themselves_pass() -> None:
    for value in (nested(MAX_JSON_DEPTH), [LARGEST, -LARGEST], [1.7e308], ["😀"], {"a": 1, "b": 1}):
        assert refusal_of(json.dumps(value, ensure_ascii=False).encode(), "application/json") is None, value
    assert refusal_of(b'["\\ud83d\\ude00"]', "application/json") is None  # a surrogate pair, escaped, is one character
    for content_type in (None, "application/json; charset=utf-8", "application/problem+json", "Application/JSON"):
        assert refusal_of(b"{}", content_type) is None, content_type
    assert refusal_of(b"", "text/plain") is None  # no body: nothing to read
