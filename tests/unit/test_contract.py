"""workflows/contract.py names what the workflow and the worker register, both ways.

The names are read from the SDK's own definitions (what a worker would register), so a handler
added, renamed or dropped on either side fails here, not in production, where a client asking
an old name gets "expected but not found" from a session paused for a week.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from temporalio import activity, workflow

from activities.model import ModelActivities
from activities.notify import NotifyActivities
from activities.offline_model import OfflineModel
from activities.run_tool import ToolActivities
from activities.session_environment import SessionEnvironment
from hitl.worker import session_activities
from workflows import contract
from workflows.agent import AgentWorkflow

DEFINITION = workflow._Definition.from_class(AgentWorkflow)


def members(annotation: Any) -> tuple[Any, ...]:
    """The types an annotation allows: `A | B | None` is (A, B, NoneType)."""
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def same_model(one: Any, other: Any) -> bool:
    """The same class, or two models with the same fields (a copy the workflow still defines)."""
    if one is other:
        return True
    if not all(isinstance(model, type) and issubclass(model, BaseModel) for model in (one, other)):
        return False
    return fields_of(one) == fields_of(other)


def fields_of(model: type[BaseModel]) -> dict[str, tuple[Any, Any]]:
    return {name: (field.annotation, field.default) for name, field in model.model_fields.items()}


def test_the_workflow_type_is_the_contracts() -> None:
    assert DEFINITION.name == contract.WORKFLOW


def test_the_workflow_registers_exactly_the_contracts_signals_updates_and_queries() -> None:
    assert set(DEFINITION.signals) == {signal.name for signal in contract.SIGNALS}
    assert set(DEFINITION.updates) == {update.name for update in contract.UPDATES}
    assert set(DEFINITION.queries) == {query.name for query in contract.QUERIES}


def test_every_signal_has_its_update_twin() -> None:
    for entry in contract.INBOUND.values():
        assert entry.update.name == f"{entry.signal.name}_update"
        assert entry.update.input is entry.signal.input


def test_the_queries_take_the_contracts_inputs() -> None:
    for query in contract.QUERIES:
        registered = DEFINITION.queries[query.name].arg_types
        if query.input is None:
            assert registered == [], query.name
            continue
        [annotation] = registered
        assert any(same_model(allowed, query.input) for allowed in members(annotation)), query.name


def worker_activities(tmp_path: Path) -> list[Any]:
    model = ModelActivities(OfflineModel())
    return session_activities(model, ToolActivities(tmp_path), NotifyActivities(tmp_path), SessionEnvironment(None))  # type: ignore[arg-type]


def test_the_worker_registers_exactly_the_contracts_activities(tmp_path: Path) -> None:
    registered = {activity._Definition.must_from_callable(fn).name for fn in worker_activities(tmp_path)}
    assert registered == {entry.name for entry in contract.ACTIVITIES}


def test_each_activity_takes_the_contracts_input_and_returns_its_result(tmp_path: Path) -> None:
    by_name = {entry.name: entry for entry in contract.ACTIVITIES}
    for fn in worker_activities(tmp_path):
        definition = activity._Definition.must_from_callable(fn)
        entry = by_name[definition.name]
        [annotation] = definition.arg_types or [Any]
        allowed = members(annotation)
        assert all(any(same_model(one, wanted) or one == get_origin(wanted) or one == wanted for one in allowed)
                   for wanted in members(entry.input)), definition.name
        if isinstance(entry.result, type) and issubclass(entry.result, BaseModel):
            assert definition.ret_type is entry.result, definition.name


def test_names_are_unique() -> None:
    """Signals and Updates share one namespace per workflow in the SDK; so do queries."""
    names = [item.name for item in (*contract.SIGNALS, *contract.UPDATES, *contract.QUERIES)]
    assert len(names) == len(set(names))
    assert len({entry.name for entry in contract.ACTIVITIES}) == len(contract.ACTIVITIES)
