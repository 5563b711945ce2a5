"""A tool schema's regular expressions, applied under a time limit.

An MCP server's input schema is the server's words, as untrusted as its results.
A pattern such as "^(a|a)*$" backtracks for seconds on 25 characters and for
hours on 40, and Python's `re` can be neither interrupted nor left: it holds
the interpreter for as long as it runs. Applied with `re` in the tool activity
(jsonschema's way), one argument the model or a person wrote froze the
worker's event loop: every activity, heartbeat and workflow task of that worker
stopped with it.

The `regex` module takes a timeout. An activity that checks arguments opens a
budget (`regex_time_limit`, REGEX_SECONDS for all its checks together: a reply
of many calls, or a schema of many patterns, is bounded as a whole), and every
schema regex applied inside it gets what is left; one that runs out refuses the
arguments with a reason (TooSlowToCheck), like any other argument that does
not fit. Outside a budget (workflow code, which must not read a clock) the
schema is applied as jsonschema does, with `re`: the workflow applies no regex
in any supported session (schema_tools.without_regexes).

A pattern's *compilation* has no timeout: `regex` expands counted repeats, so
"((a{100}){100}){100}" takes seconds and "x{100000000}" gigabytes.
`pattern_problem` refuses such patterns when a tool is offered, and before any
search.

Only the regex keywords change: `pattern`, `patternProperties`, and
`additionalProperties` beside `patternProperties`. `unevaluatedProperties`
asks jsonschema which properties its subschemas matched, with `re`: where the
schema has any `patternProperties` it is not judged, as in the workflow; the
tool's server sees the arguments a person approved, and judges them itself.
"""

from __future__ import annotations

import re
import time
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, Iterator

import jsonschema.validators
import regex
from jsonschema.exceptions import ValidationError

REGEX_SECONDS = 1.0  # for all of one activity's schema regexes together
MAX_PATTERN_CHARACTERS = 1_000
MAX_COMPILED_SIZE = 10_000  # parts once counted repeats are expanded: "(a{100}){90}" is about 9,000
# Syntax `re` reads as literal text and `regex` as something else: fuzzy matching ("a{e<=1}"
# matches "b") and POSIX classes ("[[:alpha:]]"). The metaschema (`re`) accepts them, so a pattern
# would mean one thing to the server's own check and another here: not applied.
REGEX_ONLY = (
    (re.compile(r"(?:^|[^\\])(?:\\\\)*\{[^{}]*(?<![A-Za-z\\])[eids](?![A-Za-z])[^{}]*\}"), "a fuzzy-match constraint such as {e<=1}"),
    (re.compile(r"\[:\^?[A-Za-z]+:\]"), "a POSIX class such as [:alpha:]"),
)


class TooSlowToCheck(ValueError):
    """A schema regex that did not finish within its budget, or could not be applied."""


class RegexBudget:
    """One activity's time for schema regexes: each search gets what is left."""

    def __init__(self, seconds: float = REGEX_SECONDS) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def search(self, pattern: str, text: str) -> bool:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise TooSlowToCheck(f"the tool's schema pattern {shown(pattern)} cannot be applied: {problem}")
        left = self.deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return regex.search(pattern, text, timeout=left) is not None
        except TimeoutError:
            raise TooSlowToCheck(
                f"the tool's schema pattern {shown(pattern)} did not finish on a {len(text)}-character "
                f"value within {self.seconds:g} s (a pattern that backtracks): not checked, so not run"
            ) from None
        except (regex.error, MemoryError, OverflowError, RecursionError) as error:
            raise TooSlowToCheck(f"the tool's schema pattern {shown(pattern)} cannot be applied: {error}") from None


_BUDGET: ContextVar[RegexBudget | None] = ContextVar("schema_regex_budget", default=None)


@contextmanager
def regex_time_limit(seconds: float = REGEX_SECONDS) -> Iterator[RegexBudget]:
    """Every schema regex applied inside (in this task or thread) shares `seconds`."""
    budget = RegexBudget(seconds)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def current_budget() -> RegexBudget | None:
    return _BUDGET.get()


def shown(pattern: str, at_most: int = 100) -> str:
    return repr(pattern if len(pattern) <= at_most else pattern[:at_most] + "...")


@lru_cache(maxsize=1024)
def pattern_problem(pattern: str) -> str | None:
    """Why a schema pattern is not applied, or None: too long, not a regex `re` reads, or counted
    repeats that would expand past MAX_COMPILED_SIZE parts when `regex` compiles them."""
    if len(pattern) > MAX_PATTERN_CHARACTERS:
        return f"{len(pattern)} characters; at most {MAX_PATTERN_CHARACTERS} are applied"
    for syntax, meaning in REGEX_ONLY:
        if syntax.search(pattern):
            return f"it holds {meaning}, which `re` and `regex` read differently"
    try:
        with warnings.catch_warnings():  # "possible nested set" and the like: the pattern's, not ours
            warnings.simplefilter("ignore")
            parsed = re._parser.parse(pattern)  # type: ignore[attr-defined]  # the stdlib's own parser
    except (re.error, RecursionError, OverflowError) as error:
        return f"not a regular expression ({error})"
    size = _compiled_size(parsed)
    if size > MAX_COMPILED_SIZE:
        return f"its counted repeats expand to {size:,} parts; at most {MAX_COMPILED_SIZE:,} are applied"
    return None


def _compiled_size(items: Any) -> int:
    """About how many nodes `regex` compiles a parsed pattern into: counted repeats are expanded,
    side by side as well as nested ("(a|b){10000}" twenty times over crashed the worker's stack)."""
    size = 0
    for _op, value in items:
        size += 1 + sum(copies * _compiled_size(inner) for inner, copies in _nested(value))
    return size


def _nested(value: Any) -> Iterator[tuple[Any, int]]:
    """The sub-patterns of one parsed item, each with how many copies a compiler makes of it."""
    if isinstance(value, re._parser.SubPattern):  # type: ignore[attr-defined]
        yield value, 1
    elif isinstance(value, (tuple, list)):
        if len(value) == 3 and all(isinstance(bound, int) for bound in value[:2]) and isinstance(value[2], re._parser.SubPattern):  # type: ignore[attr-defined]
            low, high, inner = value  # a repeat: {low,high}, MAXREPEAT when unbounded
            copies = max(low, high if high < re._constants.MAXREPEAT else low, 1)  # type: ignore[attr-defined]
            yield inner, copies
            return
        for part in value:
            yield from _nested(part)


def schema_patterns(schema: Any) -> Iterator[str]:
    """Every regex a schema holds: `pattern` values and `patternProperties` keys, at any depth."""
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        if isinstance(schema.get("patternProperties"), dict):
            yield from (key for key in schema["patternProperties"] if isinstance(key, str))
        for value in schema.values():
            yield from schema_patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from schema_patterns(value)


def has_pattern_properties(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "patternProperties" in schema or any(has_pattern_properties(value) for value in schema.values())
    if isinstance(schema, list):
        return any(has_pattern_properties(value) for value in schema)
    return False


def _budget() -> RegexBudget:
    budget = current_budget()
    assert budget is not None, "the bounded validator is used inside regex_time_limit only"
    return budget


def _pattern(validator: Any, expression: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _budget().search(expression, instance):
        yield ValidationError(f"{instance!r} does not match {expression!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for expression, subschema in patterns.items():
        for key, value in instance.items():
            if _budget().search(expression, key):
                yield from validator.descend(value, subschema, path=key, schema_path=expression)


@lru_cache(maxsize=64)
def bounded(validator_class: Any, unevaluated_judged: bool) -> Any:
    """`validator_class` with its regex keywords applied through the current budget."""
    original_additional = validator_class.VALIDATORS.get("additionalProperties")
    original_unevaluated = validator_class.VALIDATORS.get("unevaluatedProperties")

    def additional_properties(validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if "patternProperties" not in schema:
            if original_additional is not None:
                yield from original_additional(validator, allowed, instance, schema)
            return
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        extras = [key for key in instance if key not in properties
                  and not any(_budget().search(expression, key) for expression in schema["patternProperties"])]
        if validator.is_type(allowed, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], allowed, path=extra)
        elif not allowed and extras:
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: {patterns}")

    def unevaluated_properties(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if unevaluated_judged and original_unevaluated is not None:
            yield from original_unevaluated(validator, value, instance, schema)

    return jsonschema.validators.extend(validator_class, {
        "pattern": _pattern, "patternProperties": _pattern_properties,
        "additionalProperties": additional_properties, "unevaluatedProperties": unevaluated_properties,
    })
