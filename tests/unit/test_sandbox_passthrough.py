"""What Temporal's sandbox would catch in the workflow's own code, checked without it.

The workflow's code (workflows/agent.py, its parts) and pure modules are passed through the
sandbox (hitl/worker.py): imported once per worker instead of once per session. The sandbox no longer stands between them and a
clock, randomness or I/O, so this test does: none of them may import such a module or read the
wall clock, except in the few functions that run in the worker or the API and never in a workflow
(listed below, each with who calls it).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from hitl.plugin import PURE_MODULES, SANDBOX, WORKFLOW_MODULES

pytestmark = pytest.mark.unit

FORBIDDEN_MODULES = {"os", "time", "random", "secrets", "uuid", "threading", "subprocess", "socket", "urllib",
                     "http", "requests", "httpx", "sqlite3"}
WALL_CLOCK = {"now", "utcnow", "today"}  # datetime's; the workflow's own is workflow.now()
OUTSIDE_THE_WORKFLOW = {
    ("workflows.policy", "os"): "policy_from_env: the judge_calls and session_facts local activities, the API",
    ("workflows.agents", "os"): "agents_from_env: the worker as it starts, the session_facts and unknown_tools local activities",
    ("workflows.proofs", "secrets"): "sign_decision: the API and the terminal sign decisions, the workflow verifies",
    ("workflows.proofs", "sign_decision"): "likewise: its default `now` is the signer's clock",
}


class Offences(ast.NodeVisitor):
    """Imports of the world and wall-clock reads, each with the function it sits in."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []  # (where: a function name or a module, what)
        self.functions: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                self.found.append((alias.name.split(".")[0], f"line {node.lineno}: import {alias.name}"))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.split(".")[0] in FORBIDDEN_MODULES:
            self.found.append((node.module.split(".")[0], f"line {node.lineno}: from {node.module} import ..."))

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if (isinstance(function, ast.Attribute) and function.attr in WALL_CLOCK
                and not (isinstance(function.value, ast.Name) and function.value.id == "workflow")):
            where = self.functions[0] if self.functions else "<module>"
            self.found.append((where, f"line {node.lineno}: .{function.attr}() reads the wall clock"))
        self.generic_visit(node)


def offences(source: str, module: str = "") -> list[str]:
    visitor = Offences()
    visitor.visit(ast.parse(source))
    return [what for where, what in visitor.found if (module, where) not in OUTSIDE_THE_WORKFLOW]


def source_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin).read_text()


@pytest.mark.parametrize("module", [*WORKFLOW_MODULES, *(m for m in PURE_MODULES if m.startswith("workflows."))])
def test_the_workflow_code_reads_no_clock_randomness_or_world(module: str) -> None:
    assert offences(source_of(module), module) == []


def test_every_workflow_module_is_shared() -> None:
    """A new part or pure module left off the lists would be imported again for every session,
    and escape this test."""
    spec = importlib.util.find_spec("workflows.agent")
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent
    modules = {f"workflows.{path.stem}" for path in folder.glob("*.py")} - {"workflows.__init__"}
    assert modules - set(SANDBOX.passthrough_modules) == set()


def test_the_check_sees_a_clock_randomness_and_the_world() -> None:
    assert offences("import time\nfrom random import random\nfrom datetime import datetime\n"
                    "def f():\n    return datetime.now()\n") == [
        "line 1: import time", "line 2: from random import ...", "line 5: .now() reads the wall clock"]
    assert offences("def f():\n    return workflow.now()\n") == []
