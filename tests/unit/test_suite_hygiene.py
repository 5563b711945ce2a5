"""The suite's own rules, checked on its source: a wait that cannot fail is no wait.

A helper that polls until a predicate holds (`wait_for_status(handle, until)`,
`eventually(probe, until)`) is a claim about the session; a predicate that is
always true claims nothing, and the test passes whatever the product does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def always_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Lambda) and isinstance(node.body, ast.Constant) and node.body.value is True


def called_name(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def is_a_wait(call: ast.Call) -> bool:
    """The suite's polling helpers and the SDK's own: wait_for_status, eventually, wait_condition, ..."""
    name = called_name(call)
    return "wait" in name or name in ("eventually", "settled")


def waits_on_nothing(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and is_a_wait(node)
            and any(always_true(argument) for argument in (*node.args, *(keyword.value for keyword in node.keywords)))]


@pytest.mark.parametrize("path", sorted(TESTS.rglob("*.py")), ids=lambda path: str(path.relative_to(TESTS)))
def test_no_test_waits_on_a_predicate_that_is_always_true(path: Path) -> None:
    lines = waits_on_nothing(ast.parse(path.read_text(), str(path)))
    assert not lines, f"{path.name}: a call given `lambda ...: True` on line(s) {lines}"


def test_the_check_sees_an_always_true_predicate() -> None:
    assert waits_on_nothing(ast.parse("await wait_for_status(handle, lambda s: True)")) == [1]
    assert waits_on_nothing(ast.parse("await wait_for_status(handle, until=lambda s: True)")) == [1]
    assert waits_on_nothing(ast.parse("await eventually(probe, lambda s: True)")) == [1]
    assert waits_on_nothing(ast.parse("await wait_for_status(handle, lambda s: s['pending'] > 0)")) == []
    assert waits_on_nothing(ast.parse("RunCheck(run_id=RUN, refused_before=lambda nonce: True)")) == []
