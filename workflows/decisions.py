"""What a person sends about a pending call: approve, reject, answer, claim, release.

The decision models are the wire format of the signals and Updates (see
workflows/contract.py), parsed here once into typed values; a payload that does
not parse is a Refusal with code `invalid`, never a failed workflow task. What a
decision does to the pending call is workflows/pauses.py's rule book.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from workflows.forms import describe_validation_error
from workflows.limits import MAX_ARGUMENT_BYTES, MAX_TEXT_BYTES, Name, Note, Proof, within_json_bytes
from workflows.rules import Remember, args_sha256

DEFAULT_CLAIM_SECONDS = 900.0
# A claim keeps others out of a decision: for an hour at most (the API's bound, and the session's
# since authorization); a day is all a claim's payload may say on sessions started before that.
CLAIM_SECONDS_AT_MOST = 3600.0
MAX_CLAIM_SECONDS = 86400.0


# stale_run: a proof made for another run of the session (a client signs again for the current one).
# busy: the run could not take it at this moment (a local activity's result is on its way, or the run
# is continuing as new); nothing was applied, and the same Update sent again in a moment is taken
# (hitl/client/updates.py does that).
RefusalCode = Literal["not_found", "forbidden", "conflict", "invalid", "stale_run", "busy"]


class Refusal(Exception):
    """A decision that matches no pending item or breaks a rule; it changes nothing.

    `code` is what crosses the wire beside the reason (an Update's failure details), so a client
    maps it to its own terms (the API: 404, 403, 409, 422) and never reads the English."""

    code: RefusalCode = "conflict"

    def __init__(self, reason: str, code: RefusalCode | None = None) -> None:
        super().__init__(reason)
        if code is not None:
            self.code = code


EditedArgs = Annotated[dict[str, Any], AfterValidator(within_json_bytes(MAX_ARGUMENT_BYTES))]
AnyValue = Annotated[Any, AfterValidator(within_json_bytes(MAX_TEXT_BYTES))]


class DecisionBase(BaseModel):
    """What every decision says: which call, who, what the person saw, and on verified sessions a proof."""

    model_config = ConfigDict(extra="forbid")
    verb: ClassVar[str] = "decide"

    call_id: Name | None = None
    by: Name | None = None
    # The door it came through (api, slack, email, ag-ui, a2a, terminal...), for the audit; on a
    # verified session the proof binds it, so a door cannot be claimed under another's signature.
    via: Name | None = None
    expected_args_sha256: Name | None = None
    proof: Proof | None = None

    def digest(self) -> str:
        """What a proof binds besides the call: everything this decision does (its arguments,
        result, comment, remember, reason, answer, claim time), so no field can be changed or
        added under someone else's signature."""
        # `via` is left out while unset, so a proof signed before doors were named stays valid.
        unset = {"via"} if self.via is None else set()
        fields = self.model_dump(mode="json", exclude={"proof", "by", "call_id", *unset})
        return args_sha256({"verb": self.verb, **fields})


class Approve(DecisionBase):
    verb: ClassVar[str] = "approve"
    args: EditedArgs | None = None
    result: AnyValue = None
    comment: Note | None = None
    remember: Remember | None = None


class Reject(DecisionBase):
    verb: ClassVar[str] = "reject"
    reason: Note | None = None


class Answer(DecisionBase):
    verb: ClassVar[str] = "answer"
    answer: Annotated[str | int | float | bool | dict[str, Any] | list[Any], AfterValidator(within_json_bytes(MAX_TEXT_BYTES))]


class Claim(DecisionBase):
    """Take an item so that nobody else decides it meanwhile."""

    verb: ClassVar[str] = "claim"
    for_seconds: Annotated[float, Field(gt=0, le=MAX_CLAIM_SECONDS, allow_inf_nan=False)] = DEFAULT_CLAIM_SECONDS


class Release(DecisionBase):
    verb: ClassVar[str] = "release"


Decision = Union[Approve, Reject, Answer]
DECISION_TYPES: dict[str, type[Decision | Claim | Release]] = {
    "approve": Approve, "reject": Reject, "answer": Answer, "claim": Claim, "release": Release,
}


def parse_decision(verb: str, payload: Any) -> Decision | Claim | Release:
    if verb == "answer" and not isinstance(payload, dict) and payload is not None:
        payload = {"answer": payload}  # `--input '"Shanghai"'` answers the one pending question
    try:
        return DECISION_TYPES[verb].model_validate(payload if payload is not None else {})
    except ValidationError as error:
        raise Refusal(f"malformed {verb}: {describe_validation_error(error)}", code="invalid") from None
