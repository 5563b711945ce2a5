"""A tool schema's regular expressions, applied under a time limit.

An MCP server's input schema is the server's words, as untrusted as its results.
A pattern such as "^(a+)+$" backtracks for seconds on 27 characters and for
hours on 40, and Python's `re` can be neither interrupted nor left: it holds
the interpreter for as long as it runs. Applied with `re` in the tool activity
(jsonschema's way), one argument the model or a person wrote froze the
worker's event loop: every activity, heartbeat and workflow task of that worker
stopped with it.

The `regex` module takes a timeout. Every regex one check applies shares one
budget (REGEX_SECONDS), so a schema of many slow patterns is bounded too; a
check that runs out is refused with a reason (TooSlowToCheck), like any other
argument that does not fit. Only the regex keywords change: `pattern`,
`patternProperties`, and `additionalProperties` beside `patternProperties`.
`unevaluatedProperties` asks jsonschema which properties its subschemas
matched, with `re`: where the schema has any `patternProperties` it is not
judged, as in the workflow (schema_tools.without_regexes); the tool's server
sees the arguments a person approved, and judges them itself.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import jsonschema.validators
import regex
from jsonschema.exceptions import ValidationError

REGEX_SECONDS = 1.0  # for all of one check's regexes together


class TooSlowToCheck(ValueError):
    """A schema regex that did not finish within the check's budget."""


class RegexBudget:
    """One check's time for regexes: each search gets what is left."""

    def __init__(self, seconds: float = REGEX_SECONDS) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def search(self, pattern: str, text: str) -> bool:
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
        except regex.error as error:
            raise TooSlowToCheck(f"the tool's schema pattern {shown(pattern)} cannot be applied: {error}") from None


def shown(pattern: str, at_most: int = 100) -> str:
    return repr(pattern if len(pattern) <= at_most else pattern[:at_most] + "...")


def has_pattern_properties(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "patternProperties" in schema or any(has_pattern_properties(value) for value in schema.values())
    if isinstance(schema, list):
        return any(has_pattern_properties(value) for value in schema)
    return False


def bounded(validator_class: Any, budget: RegexBudget, root_schema: dict[str, Any]) -> Any:
    """`validator_class` with its regex keywords applied through `budget`."""
    original_additional = validator_class.VALIDATORS.get("additionalProperties")
    original_unevaluated = validator_class.VALIDATORS.get("unevaluatedProperties")
    unevaluated_judged = not has_pattern_properties(root_schema)

    def pattern(validator: Any, expression: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not budget.search(expression, instance):
            yield ValidationError(f"{instance!r} does not match {expression!r}")

    def pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for expression, subschema in patterns.items():
            for key, value in instance.items():
                if budget.search(expression, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=expression)

    def additional_properties(validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if "patternProperties" not in schema:
            if original_additional is not None:
                yield from original_additional(validator, allowed, instance, schema)
            return
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        extras = [key for key in instance if key not in properties
                  and not any(budget.search(expression, key) for expression in schema["patternProperties"])]
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
        "pattern": pattern, "patternProperties": pattern_properties,
        "additionalProperties": additional_properties, "unevaluatedProperties": unevaluated_properties,
    })
