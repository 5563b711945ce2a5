"""A decision carried by an A2A message: one data part, checked as the HTTP routes check theirs.

`{"call_id": "...", "decision": "approve" | "reject" | "answer", ...}`: the
other keys are the body of the matching route (hitl/api/calls.py), so `args`,
`comment` and `remember` go with approve, `reason` with reject, `answer` with
answer, and anything else is refused before anything is decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from a2a.utils.errors import InvalidParamsError
from pydantic import ValidationError

from hitl.api.calls import DOOR_VERBS, decision_fields
from workflows.forms import describe_validation_error

Verb = Literal["approve", "reject", "answer"]


@dataclass(frozen=True)
class Decision:
    call_id: str
    verb: Verb
    fields: dict[str, Any]


def decision_of(data: Any) -> Decision:
    """The decision a data part says, or InvalidParamsError with one line."""
    if not isinstance(data, dict):
        raise InvalidParamsError('a decision is an object {"call_id", "decision", ...}')
    given = dict(data)
    call_id, verb = given.pop("call_id", None), given.pop("decision", None)
    if not isinstance(call_id, str) or not call_id:
        raise InvalidParamsError("a decision names its call: call_id, from the card's data part")
    if verb not in DOOR_VERBS:
        raise InvalidParamsError(f"decision: one of approve, reject, answer (not {verb!r})")
    try:
        return Decision(call_id, verb, decision_fields(verb, given))
    except ValidationError as error:
        raise InvalidParamsError(f"{verb}: {describe_validation_error(error)}") from None
