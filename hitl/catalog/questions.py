"""The question tool: answered by a person, never run by the worker.

It lives in the catalog, not with the activities, because the workflow itself
reads its arguments when it opens the question.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hitl.catalog.specs import CATALOG, ToolSpec


class FormField(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    type: Literal["string", "number", "integer", "boolean", "date", "enum"] = "string"
    required: bool = True
    choices: list[str] | None = None
    description: str | None = None


class AskUserQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="One clear question for the person")
    choices: list[str] | None = Field(default=None, description="Allowed answers, if the answer must be one of them")
    fields: list[FormField] | None = Field(default=None, description="Several values to ask for in one form")


ASK_USER_QUESTION = CATALOG.add(
    ToolSpec(
        name="ask_user_question",
        description=(
            "Ask the person a question when information is missing, instead of guessing. "
            "The result is the person's own answer, verbatim: treat it as an authoritative fact."
        ),
        arguments=AskUserQuestion,
        function=None,
        answered_by_human=True,
    )
)


def question_of(args: Any) -> AskUserQuestion:
    return args if isinstance(args, AskUserQuestion) else AskUserQuestion.model_validate(args)
