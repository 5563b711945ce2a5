"""A tool server's schema regexes are applied under a time limit (hitl/catalog/bounded_regexes.py):
a pattern that backtracks refuses the arguments with a reason instead of holding the worker."""

from __future__ import annotations

from typing import Any

import pytest

from hitl.catalog.schema_tools import ArgumentsRejected, validate_arguments

pytestmark = pytest.mark.unit

BACKTRACKS = r"^(a|a)*$"  # exponential in `re` and in `regex` alike: 2^26 paths on 26 characters
SLOW = "a" * 26 + "!"  # about 20 s with `re` on these cores; the check's budget is 1 s


def tag_schema(pattern: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"tag": {"type": "string", "pattern": pattern}}, "required": ["tag"]}


def test_a_pattern_that_backtracks_refuses_the_arguments_and_says_why() -> None:
    with pytest.raises(ArgumentsRejected, match=r"did not finish on a 27-character value within 1 s"):
        validate_arguments(tag_schema(BACKTRACKS), {"tag": SLOW})


def test_slow_pattern_properties_are_bounded_too() -> None:
    schema = {"type": "object", "patternProperties": {BACKTRACKS: {"type": "string"}}, "additionalProperties": False}
    with pytest.raises(ArgumentsRejected, match="did not finish"):
        validate_arguments(schema, {SLOW: "x"})


def test_patterns_still_judge_as_jsonschema_does() -> None:
    assert validate_arguments(tag_schema(r"^v\d+$"), {"tag": "v12"}) == {"tag": "v12"}
    with pytest.raises(ArgumentsRejected, match=r"tag: 'x12' does not match '\^v\\\\d\+\$'"):
        validate_arguments(tag_schema(r"^v\d+$"), {"tag": "x12"})
    schema = {"type": "object", "properties": {"name": {"type": "string"}},
              "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    assert validate_arguments(schema, {"name": "a", "x-count": 3}) == {"name": "a", "x-count": 3}
    with pytest.raises(ArgumentsRejected, match="x-count: 'three' is not of type 'integer'"):
        validate_arguments(schema, {"x-count": "three"})
    with pytest.raises(ArgumentsRejected, match=r"'other' does not match any of the regexes: '\^x-'"):
        validate_arguments(schema, {"other": 1})
    extra_as_schema = {**schema, "additionalProperties": {"type": "boolean"}}
    with pytest.raises(ArgumentsRejected, match="other: 1 is not of type 'boolean'"):
        validate_arguments(extra_as_schema, {"other": 1})


def test_unevaluated_properties_are_judged_where_no_regex_decides_them() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "unevaluatedProperties": False}
    with pytest.raises(ArgumentsRejected, match="Unevaluated properties are not allowed"):
        validate_arguments(schema, {"a": "x", "b": 1})
    with_patterns = {**schema, "allOf": [{"patternProperties": {"^x-": {}}}]}
    assert validate_arguments(with_patterns, {"a": "x", "b": 1}) == {"a": "x", "b": 1}


def test_a_pattern_that_is_no_regex_refuses_the_arguments_with_its_reason() -> None:
    """A schema's patterns are not checked when the tool is offered (jsonschema asserts no formats):
    `re` raised re.error out of the tool activity, which retried it as a transient failure."""
    with pytest.raises(ArgumentsRejected, match=r"pattern '\(' cannot be applied: missing \)"):
        validate_arguments(tag_schema("("), {"tag": "ab"})
