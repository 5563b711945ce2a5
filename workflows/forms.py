"""Checking a person's answer against the question's choices or form fields."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from pydantic import TypeAdapter, ValidationError

from workflows.limits import MAX_TEXT_BYTES, json_size, utf8_size

FIELD_TYPES: dict[str, TypeAdapter[Any]] = {
    "string": TypeAdapter(str),
    "number": TypeAdapter(float),
    "integer": TypeAdapter(int),
    "boolean": TypeAdapter(bool),
    "date": TypeAdapter(date),
}


MAX_ANSWER = MAX_TEXT_BYTES  # bytes of an answer, as JSON when it is not a string


def check_answer(answer: Any, choices: list[str] | None, fields: list[dict[str, Any]] | None) -> Any:
    """The answer as it will be injected, or ValueError saying why it does not fit."""
    if (utf8_size(answer) if isinstance(answer, str) else json_size(answer)) > MAX_ANSWER:
        raise ValueError(f"the answer is longer than {MAX_ANSWER} bytes")
    if fields:
        return _check_form(answer, fields)
    if choices:
        text = answer if isinstance(answer, str) else None
        for choice in choices:
            if text is not None and text.strip().casefold() == choice.casefold():
                return choice
        raise ValueError(f"{answer!r} is not one of the choices {choices}")
    if isinstance(answer, str) and not answer.strip():
        raise ValueError("the answer is empty")
    return answer


def _check_form(answer: Any, fields: list[dict[str, Any]]) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise ValueError("this question is a form: answer with an object of its fields")
    names = {field["name"] for field in fields}
    unknown = sorted(set(answer) - names)
    if unknown:
        raise ValueError(f"unknown fields {unknown}; the form has {sorted(names)}")
    checked: dict[str, Any] = {}
    for field in fields:
        name = field["name"]
        if answer.get(name) is None:
            if field.get("required", True):
                raise ValueError(f"{name} is required")
            continue
        checked[name] = _check_field(name, field, answer[name])
    return checked


def _check_field(name: str, field: dict[str, Any], value: Any) -> Any:
    kind = field.get("type", "string")
    if kind == "enum" or field.get("choices"):
        choices = [str(c) for c in field.get("choices") or []]
        if str(value) not in choices:
            raise ValueError(f"{name}: {value!r} is not one of {choices}")
        return value
    adapter = FIELD_TYPES.get(kind)
    if adapter is None:
        raise ValueError(f"{name}: the form declares an unknown type {kind!r}")
    try:
        return TypeAdapter(Any).dump_python(adapter.validate_python(value), mode="json")
    except ValidationError as error:
        raise ValueError(f"{name}: {describe_validation_error(error)}") from None


def describe_validation_error(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in item['loc']) or 'value'}: {item['msg']}" for item in error.errors()[:5]
    )
