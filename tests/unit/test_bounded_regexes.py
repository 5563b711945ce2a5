"""A tool server's schema regexes are applied under a time limit (hitl/catalog/bounded_regexes.py):
a pattern that backtracks refuses the arguments with a reason instead of holding the worker."""

from __future__ import annotations

import re
from typing import Any

import pytest

from hitl.catalog.bounded_regexes import regex_time_limit
from hitl.catalog.schema_tools import ArgumentsRejected, schema_problem
from hitl.catalog.schema_tools import validate_arguments as validate_anywhere

pytestmark = pytest.mark.unit


def validate_arguments(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """As the activities check arguments: inside a budget of their own."""
    with regex_time_limit():
        return validate_anywhere(schema, args)

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


def test_a_pattern_that_is_no_regex_is_refused_when_offered_and_when_applied() -> None:
    """The metaschema refuses it when the tool is offered; applied all the same, it refuses the
    arguments with its reason, where `re` raised re.error out of the activity (retried as transient)."""
    assert schema_problem(tag_schema("(")) == "'(' is not a 'regex'"
    problem = "not a regular expression (missing ), unterminated subpattern at position 0)"
    with pytest.raises(ArgumentsRejected, match=re.escape(f"pattern '(' cannot be applied: {problem}")):
        validate_arguments(tag_schema("("), {"tag": "ab"})


def test_one_budget_for_every_check_of_an_activity() -> None:
    """A reply of many calls against a backtracking pattern: 1 s for them all, not 1 s each."""
    with regex_time_limit():
        with pytest.raises(ArgumentsRejected, match="did not finish"):
            validate_anywhere(tag_schema(BACKTRACKS), {"tag": SLOW})
        for _ in range(10):
            with pytest.raises(ArgumentsRejected, match="did not finish"):
                validate_anywhere(tag_schema(BACKTRACKS), {"tag": "a" * 20 + "!"})  # 0.2 s alone


@pytest.mark.parametrize("pattern, problem", [
    ("((a{100}){100}){100}", "its counted repeats expand to 1,020,201 parts; at most 10,000 are applied"),
    ("x{4294967294}", "its counted repeats expand to 4,294,967,295 parts; at most 10,000 are applied"),
    # Side by side, not nested: `regex` compiled this into a stack overflow (the worker segfaulted).
    ("((a)|(b)){10000}" * 20, "its counted repeats expand to 1,200,020 parts; at most 10,000 are applied"),
    ("a" * 1001, "1001 characters; at most 1000 are applied"),
    # `re` reads these as literal text, `regex` as fuzzy matching ("b" matches) and a POSIX class.
    (r"^\\{e<=1}$", "it holds a fuzzy-match constraint such as {e<=1}, which `re` and `regex` read differently"),
    ("^a{e<=1}$", "it holds a fuzzy-match constraint such as {e<=1}, which `re` and `regex` read differently"),
    ("^[[:alpha:]]+$", "it holds a POSIX class such as [:alpha:], which `re` and `regex` read differently"),
])
def test_patterns_too_large_to_compile_or_read_otherwise_are_refused_when_offered_and_when_applied(
    pattern: str, problem: str,
) -> None:
    """`regex` expands counted repeats as it compiles, with no time or memory limit of its own:
    seconds for the first, gigabytes for the second."""
    assert schema_problem(tag_schema(pattern)).endswith(f"cannot be applied: {problem}")
    with pytest.raises(ArgumentsRejected, match=re.escape(problem)):
        validate_arguments(tag_schema(pattern), {"tag": "x"})


def test_a_subschema_with_a_dialect_of_its_own_is_refused_when_offered() -> None:
    """jsonschema checks such a subschema with its stock validator: `re`, whatever is replaced here."""
    nested = {"type": "object", "properties": {"tag": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                                      "type": "string", "pattern": BACKTRACKS}}}
    assert schema_problem(nested) == "a subschema names its own $schema: one dialect per tool schema is accepted"
    assert schema_problem({"$schema": "https://json-schema.org/draft/2020-12/schema", **tag_schema("^a$")}) is None


def test_outside_an_activity_the_schema_runs_as_recorded_sessions_ran_it() -> None:
    """Workflow code reads no clock: there, without a budget, jsonschema applies the regexes itself."""
    with pytest.raises(ArgumentsRejected, match="does not match"):
        validate_anywhere(tag_schema(r"^v\d+$"), {"tag": "x"})
