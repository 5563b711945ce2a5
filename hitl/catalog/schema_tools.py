"""Tools described by a JSON schema rather than a Python signature (MCP servers' tools).

Their arguments are checked with the schema itself (jsonschema), so what the
model reads and what is enforced are the same document. The schema is also
recorded with every planned call (`recorded_schema`): a person's edited
arguments are checked in the workflow against the schema the call was planned
with, which replays the same whatever the server offers today.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator

import jsonschema
from jsonschema.exceptions import best_match
from pydantic import BaseModel

from hitl.catalog.bounded_regexes import (
    TooSlowToCheck, bounded, current_budget, has_pattern_properties, pattern_problem, schema_patterns, shown,
)
from hitl.catalog.specs import ToolContext, ToolSpec

Runner = Callable[[dict[str, Any], ToolContext], Awaitable[str]]


class ArgumentsRejected(ValueError):
    """Arguments that do not fit a tool's JSON schema; the message says where and why."""


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why a schema cannot be used to check arguments, or None when it can."""
    try:
        with warnings.catch_warnings():  # `re`'s "possible nested set" as the metaschema compiles a pattern
            warnings.simplefilter("ignore", FutureWarning)
            jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as error:
        return error.message
    if schema.get("type", "object") != "object":
        return "the arguments must be an object"
    if nested_dialect(schema):
        # jsonschema validates such a subschema with its own stock class, which applies the regexes
        # with `re` whatever keywords the checks here replace (without_regexes, bounded_regexes).
        return "a subschema names its own $schema: one dialect per tool schema is accepted"
    for pattern in schema_patterns(schema):
        if (problem := pattern_problem(pattern)) is not None:
            return f"the pattern {shown(pattern)} cannot be applied: {problem}"
    return None


def nested_dialect(schema: Any, root: bool = True) -> bool:
    """Whether any subschema below the root carries `$schema`."""
    if isinstance(schema, dict):
        return (not root and "$schema" in schema) or any(nested_dialect(value, False) for value in schema.values())
    if isinstance(schema, list):
        return any(nested_dialect(value, False) for value in schema)
    return False


def _no_check(*_: Any) -> Iterator[Any]:
    return iter(())


def without_regexes(validator_class: Any) -> Any:
    """The validator, minus every keyword that runs one of the schema's regexes.

    A server's regex can backtrack for hours on a short string ("^(a+)+$" on 40
    characters). In the workflow that fails every workflow task for ever (Temporal's
    deadlock detector) and pins a worker thread, so edited arguments are checked there
    without these; the tool activity checks them whole, each regex under a time limit
    (hitl/catalog/bounded_regexes.py), before anything is sent to the server."""
    additional = validator_class.VALIDATORS.get("additionalProperties")

    def additional_properties(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        # Which properties are additional depends on patternProperties' regexes: not judged then.
        if additional is None or "patternProperties" in schema:
            return iter(())
        return additional(validator, value, instance, schema)

    return jsonschema.validators.extend(validator_class, {
        "pattern": _no_check, "patternProperties": _no_check, "unevaluatedProperties": _no_check,
        "additionalProperties": additional_properties,
    })


def validate_arguments(schema: dict[str, Any], args: dict[str, Any], regexes: bool = True) -> dict[str, Any]:
    """`args` when they fit `schema`, else ArgumentsRejected with the most relevant error.

    Without `regexes`, the schema's regular expressions are not applied (see without_regexes).
    With them, inside an activity's `regex_time_limit` they share its budget
    (hitl/catalog/bounded_regexes.py); elsewhere (the replay of a session whose workflow applied
    them itself, as it did when it was recorded) they run as jsonschema runs them."""
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if not regexes:
        validator_class = without_regexes(validator_class)
    elif current_budget() is not None:
        validator_class = bounded(validator_class, not has_pattern_properties(schema))
    try:
        error = best_match(validator_class(schema).iter_errors(args))
    except TooSlowToCheck as slow:
        raise ArgumentsRejected(str(slow)) from None
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        raise ArgumentsRejected(f"{where}: {error.message}" if where else error.message)
    return args


@dataclass(frozen=True)
class SchemaToolSpec(ToolSpec):
    """A tool whose arguments are a JSON object described by `input_schema`, run by `runner`."""

    # Not Python functions: no pydantic model, no function.
    arguments: type[BaseModel] | None = None  # type: ignore[assignment]
    function: Callable[..., Any] | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    runner: Runner | None = None
    source: str = ""
    # What the tool's server says of it (MCP annotations), kept whether or not they decide anything,
    # and why its approval is what it is: both shown by `starter.py tools`.
    annotations: dict[str, Any] | None = None
    policy_note: str = ""

    @property
    def hints(self) -> dict[str, Any] | None:
        """The server's annotations, as the definition fingerprint (ToolSpec.definition_sha256) reads them:
        a server that changes what it claims changes the definition a session pinned."""
        return self.annotations

    def policy(self) -> str:
        text = super().policy()
        hints = ", ".join(key for key, value in (self.annotations or {}).items() if key.endswith("Hint") and value is True)
        said = f"its server says: {hints}" if hints else ""
        notes = [note for note in (self.policy_note, said) if note and note != self.approval_rule]
        return f"{text}; {'; '.join(notes)}" if notes else text

    def check(self, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        return validate_arguments(self.input_schema, args), bool(self.needs_approval)

    def parse(self, args: dict[str, Any]) -> BaseModel:
        raise TypeError(f"{self.name} takes a JSON object checked by its schema; use check()")

    @property
    def runnable(self) -> bool:
        return self.runner is not None

    def recorded_schema(self) -> dict[str, Any] | None:
        return self.input_schema

    def parameters(self) -> dict[str, Any]:
        return self.input_schema

    async def run(self, args: dict[str, Any], context: ToolContext) -> str:
        if self.runner is None:
            raise LookupError(f"{self.name} is not run by the worker")
        return await self.runner(validate_arguments(self.input_schema, args), context)
