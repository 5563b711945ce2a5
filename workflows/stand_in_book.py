"""The book of stand-ins: every hand-over (workflows/stand_ins.py), kept by one long-lived workflow.

One per task queue (`book_id`), shared by every API process and surviving restarts: the API gives
and ends hand-overs through its Updates (`give`, `end`) and reads them with a query (`list`). Ended
and expired hand-overs are dropped a day after, and the book continues as new after a few hundred
Updates, so its history stays small.

The book checks only its own rules (stand_ins.refusal_to_hand_over); who may hand over what is the
operator's policy, which the API applies before it gives, and seals the hand-over with its key.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from temporalio import workflow

from workflows.stand_ins import BOOK_AT_MOST, StandIn, refusal_to_hand_over

BOOK_PREFIX = "hitl-stand-ins"
KEPT_AFTER_END = timedelta(days=1)  # an ended hand-over is still listed for a day, then dropped
UPDATES_PER_RUN = 500


def book_id(task_queue: str) -> str:
    return f"{BOOK_PREFIX}-{task_queue}"


class BookState(BaseModel):
    stand_ins: list[StandIn] = Field(default_factory=list)


class EndRequest(BaseModel):
    id: str
    by: str


@workflow.defn(name="StandInBook")
class StandInBook:
    def __init__(self) -> None:
        self.book = BookState()
        self.updates = 0

    @workflow.run
    async def run(self, carried: dict[str, Any] | None = None) -> None:
        if carried:
            self.book = BookState.model_validate(carried)
        await workflow.wait_condition(lambda: self.updates >= UPDATES_PER_RUN and workflow.all_handlers_finished())
        workflow.continue_as_new(self.kept(workflow.now()).model_dump(mode="json"))

    def kept(self, now: datetime) -> BookState:
        """The book without what ended (or ran out) more than a day ago."""
        return BookState(stand_ins=[stand_in for stand_in in self.book.stand_ins
                                    if (stand_in.ended_at or stand_in.until) + KEPT_AFTER_END > now])

    @workflow.update
    def give(self, hand_over: dict[str, Any]) -> dict[str, Any]:
        stand_in = StandIn.model_validate(hand_over)
        self.book = self.kept(workflow.now())
        self.book.stand_ins.append(stand_in)
        self.updates += 1
        return stand_in.model_dump(mode="json")

    @give.validator
    def check_give(self, hand_over: dict[str, Any]) -> None:
        try:
            stand_in = StandIn.model_validate(hand_over)
        except ValidationError as error:
            raise ValueError(f"malformed hand-over: {error.errors()[0]['msg']}") from None
        now = workflow.now()
        refusal = refusal_to_hand_over(stand_in.from_, stand_in.to, stand_in.until, now, self.book.stand_ins)
        if refusal is None and any(known.id == stand_in.id for known in self.book.stand_ins):
            refusal = f"a hand-over {stand_in.id} exists already"
        if refusal is None and sum(known.live(now) for known in self.book.stand_ins) >= BOOK_AT_MOST:
            refusal = f"the book holds {BOOK_AT_MOST} live hand-overs; end some first"
        if refusal is not None:
            raise ValueError(refusal)

    @workflow.update
    def end(self, request: dict[str, Any]) -> dict[str, Any]:
        ending = EndRequest.model_validate(request)
        stand_in = next(known for known in self.book.stand_ins if known.id == ending.id)
        if stand_in.ended_at is None:
            stand_in.ended_at = workflow.now()
        self.updates += 1
        return stand_in.model_dump(mode="json")

    @end.validator
    def check_end(self, request: dict[str, Any]) -> None:
        try:
            ending = EndRequest.model_validate(request)
        except ValidationError:
            raise ValueError("malformed end: send {\"id\", \"by\"}") from None
        stand_in = next((known for known in self.book.stand_ins if known.id == ending.id), None)
        if stand_in is None or ending.by not in (stand_in.from_, stand_in.to):
            raise ValueError(f"no hand-over {ending.id} of {ending.by}'s")

    @workflow.query(name="list")
    def listed(self) -> list[dict[str, Any]]:
        return [stand_in.model_dump(mode="json") for stand_in in self.book.stand_ins]
