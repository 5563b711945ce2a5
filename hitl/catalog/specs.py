"""Tool specs and the catalog: typed Python functions, one decorator, no hand-written schemas.

`@tool` reads a function's signature into a pydantic model, which gives the
JSON schema the model sees and the validator that edited arguments must pass.

The model activity consults this catalog when a reply comes (does the tool
exist, do the arguments fit, does it need approval) and that verdict is
recorded with the reply, so changing a tool's approval setting or schema on
the worker applies to new calls and never breaks the replay of running
sessions (tests/integration/test_tool_settings.py). Removing a tool is safe the same way:
later calls of it are refused to the model.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import inspect
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable, Union, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

ApprovalPolicy = Union[bool, Callable[[BaseModel], bool]]


@dataclass(frozen=True)
class ToolContext:
    """Handed to tools that ask for it: who called, and where they may write."""

    session_id: str
    call_id: str
    workspace: Path
    # The answer to what the tool's server asked (activities/mcp/elicitation.py), on its retried call.
    tool_input: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[BaseModel]
    function: Callable[..., Any] | None
    needs_approval: ApprovalPolicy = False
    review: bool = False
    answered_by_human: bool = False
    context_parameter: str | None = None

    # Set when the tool runs without asking because a deployment setting says
    # so (an MCP server's "auto_approve"); the audit trail names it.
    approval_rule: str | None = None
    destructive: bool = False
    # What running it does, in the tool's own words over its arguments ("deletes {path}"): the
    # approver's card says it before they approve (hitl/client/consequences.py).
    effect: str | None = None

    def parse(self, args: dict[str, Any]) -> BaseModel:
        return self.arguments.model_validate(args)

    def requires_approval(self, args: BaseModel) -> bool:
        policy = self.needs_approval
        return bool(policy(args) if callable(policy) else policy)

    def check(self, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The validated arguments as JSON, and whether this call needs approval.

        Raises when the arguments do not fit; a failing approval predicate
        fails safe and asks a person."""
        parsed = self.parse(args)
        try:
            approval = self.requires_approval(parsed)
        except Exception:
            approval = True
        return parsed.model_dump(mode="json", exclude_none=True), approval

    @property
    def runnable(self) -> bool:
        return self.function is not None

    def recorded_schema(self) -> dict[str, Any] | None:
        """A schema the workflow records with each call, for tools whose schema lives
        outside this code (None: the Python signature is the schema)."""
        return None

    def definition_sha256(self) -> str | None:
        """A fingerprint of what a tool's server says of it (description, schema, hints and the
        approval they led to), for tools whose definition lives outside this code (MCP); None for
        Python tools, whose definition changes only with the worker's code. A session pins it when
        it first sees the tool (workflows/planning.py, judge)."""
        if self.recorded_schema() is None:
            return None
        definition = {
            "description": self.description, "parameters": self.parameters(), "destructive": self.destructive,
            "needs_approval": self.needs_approval if isinstance(self.needs_approval, bool) else "predicate",
            "review": self.review, "rule": self.approval_rule, "hints": getattr(self, "hints", None),
        }
        canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    async def run(self, args: dict[str, Any], context: ToolContext) -> str:
        """Run the function with validated arguments; the result as text."""
        if self.function is None:
            raise LookupError(f"{self.name} is not run by the worker")
        parsed = self.parse(args)
        kwargs: dict[str, Any] = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.context_parameter:
            kwargs[self.context_parameter] = context
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(**kwargs)
        else:
            result = await asyncio.to_thread(self.function, **kwargs)
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)

    def policy(self) -> str:
        """The approval policy in words, for `starter.py tools`."""
        if self.answered_by_human:
            return "a person answers it"
        if callable(self.needs_approval):
            text = "approval when its arguments call for it"
        elif self.needs_approval:
            text = "needs approval" + (" (destructive)" if self.destructive else "")
        else:
            text = f"runs without asking ({self.approval_rule})" if self.approval_rule else "runs without asking"
        return text + ("; a person reviews the result" if self.review else "")

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }


    def parameters(self) -> dict[str, Any]:
        """The arguments' JSON schema. Built once per arguments model (pydantic's schema
        generation was an eighth of a busy worker's CPU, rebuilt for every tool on every
        model call), a fresh copy each time so no caller can change another's."""
        schema = _SCHEMAS.get(self.arguments)
        if schema is None:
            schema = _SCHEMAS[self.arguments] = without_titles(self.arguments.model_json_schema())
        return copy.deepcopy(schema)


# An arguments model's schema (ToolSpec.parameters): a pydantic model class does not change.
_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


class ToolCatalog:
    def __init__(self) -> None:
        self._specs: dict[str, ToolSpec] = {}

    def add(self, spec: ToolSpec) -> ToolSpec:
        self._specs[spec.name] = spec
        return spec

    def remove(self, name: str) -> None:
        self._specs.pop(name, None)

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def select(self, names: list[str] | None) -> list[ToolSpec]:
        """The tools a session offers: those it names that exist (a glob such as `mcp__docs__*`
        names each tool it matches), else all."""
        if names is None:
            return [self._specs[n] for n in self.names()]
        chosen: dict[str, ToolSpec] = {}
        for entry in names:
            if entry in self._specs:
                chosen.setdefault(entry, self._specs[entry])
            elif any(char in entry for char in "*?["):
                for name in self.names():
                    if fnmatchcase(name, entry):
                        chosen.setdefault(name, self._specs[name])
        return list(chosen.values())


CATALOG = ToolCatalog()


def tool(
    function: Callable[..., Any] | None = None,
    *,
    needs_approval: ApprovalPolicy = False,
    review: bool = False,
    destructive: bool = False,
    effect: str | None = None,
    name: str | None = None,
    catalog: ToolCatalog = CATALOG,
) -> Any:
    """Register a typed function as a tool.

    `needs_approval` is a flag or a predicate on the validated arguments, e.g.
    `needs_approval=lambda a: a.amount > 100`; with `review=True` the tool
    runs and a person reviews its result before the model sees it; `destructive=True` says so on
    the approver's card, and `effect` says there what approving does, over the arguments
    (`effect="deletes {path}"`: "Approve: deletes notes.txt now").
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        arguments, context_parameter = arguments_model(fn)
        catalog.add(
            ToolSpec(
                name=name or fn.__name__,
                description=inspect.cleandoc(fn.__doc__ or fn.__name__).split("\n\n")[0],
                arguments=arguments,
                function=fn,
                needs_approval=needs_approval,
                review=review,
                context_parameter=context_parameter,
                destructive=destructive,
                effect=effect,
            )
        )
        return fn

    return register(function) if function is not None else register


def arguments_model(fn: Callable[..., Any]) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of a function's parameters, leaving out its ToolContext."""
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    context_parameter = None
    for parameter in inspect.signature(fn).parameters.values():
        annotation = hints.get(parameter.name, Any)
        if annotation is ToolContext:
            context_parameter = parameter.name
            continue
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    model = create_model(
        f"{fn.__name__}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    return model, context_parameter


def without_titles(schema: Any) -> Any:
    """Pydantic's titles repeat the property names; small models read every token."""
    if isinstance(schema, dict):
        return {
            key: without_titles(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [without_titles(item) for item in schema]
    return schema
