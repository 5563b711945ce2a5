"""The layers, enforced: which part of the project may import which (docs/architecture.md).

An AST walk over every import statement, lazy ones inside functions included:

- `workflows/` is the workflow's own code and runs in Temporal's sandbox: it imports only
  `workflows`, `hitl.catalog`, the standard library, pydantic, temporalio and cryptography;
- `activities/` never imports the people-facing layers (`hitl.api`, `hitl.console`,
  `hitl.client`, `hitl.cli`);
- `hitl.client` is what both faces sit on: it imports neither of them (nor `hitl.cli`);
- `hitl.api` and `hitl.console` never import each other;
- the worker (`hitl.worker`) never imports the faces: it runs where no person does;
- nothing imports the entry points `worker.py` and `starter.py`;
- no test imports `bench/` (a benchmark's smoke test runs it as a process): what both need
  lives in `tests/support/` or the product;
- no cycle: no module of the product imports itself through others;
- the product (not its tests) imports only the SDK's public modules: a private one
  (`temporalio.worker._command_aware_visitor`) may change in any release.

`python -m tests.unit.test_layers` prints every wrong-way import and their count.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("workflows", "activities", "hitl", "bench", "tests", "worker.py", "starter.py")
PROJECT = {"workflows", "activities", "hitl", "bench", "tests", "worker", "starter"}
ENTRY_POINTS = {"worker", "starter"}
WORKFLOW_THIRD_PARTY = {"pydantic", "temporalio", "cryptography"}
FACES = ("hitl.api", "hitl.console", "hitl.client", "hitl.cli")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name of the file
    imported: str  # dotted module name it imports
    where: str  # path:line

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.imported}"


def within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_project_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> list[Import]:
    importer = module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found.extend(Import(importer, alias.name, where) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importer's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from hitl import worker` imports the module hitl.worker
                candidate = f"{base}.{alias.name}"
                found.append(Import(importer, candidate if is_project_module(candidate) else base, where))
    return list(dict.fromkeys(found))  # one per module a statement imports, however many names


def broken_rule(found: Import) -> str | None:
    """The layer rule an import breaks, or None."""
    importer, imported = found.importer, found.imported
    top = imported.split(".")[0]
    if top in ENTRY_POINTS and not within(importer, "hitl"):  # `hitl.worker` is not the entry point
        return "nothing imports the entry points worker.py and starter.py"
    if within(importer, "workflows"):
        if top in PROJECT and not within(imported, "workflows", "hitl.catalog"):
            return "workflows imports only workflows and hitl.catalog"
        if top not in PROJECT and top not in sys.stdlib_module_names and top not in WORKFLOW_THIRD_PARTY:
            return "workflows imports only the standard library, pydantic, temporalio and cryptography"
    if (top == "temporalio" and not within(importer, "tests", "bench")
            and any(part.startswith("_") for part in imported.split("."))):
        return "the product imports only the SDK's public modules"
    if within(importer, "activities") and within(imported, *FACES):
        return "activities never import hitl.api, hitl.console, hitl.client or hitl.cli"
    if within(importer, "hitl.client") and within(imported, "hitl.api", "hitl.console", "hitl.cli"):
        return "hitl.client never imports hitl.api, hitl.console or hitl.cli"
    if within(importer, "hitl.api") and within(imported, "hitl.console"):
        return "hitl.api never imports hitl.console"
    if within(importer, "hitl.console") and within(imported, "hitl.api"):
        return "hitl.console never imports hitl.api"
    if importer == "hitl.worker" and within(imported, *FACES):
        return "the worker never imports hitl.api, hitl.console, hitl.client or hitl.cli"
    if within(importer, "tests") and within(imported, "bench"):
        return "tests never import bench/: what both need lives in tests/support"
    return None


def source_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return [path for path in files if "__pycache__" not in path.parts]


def wrong_way_imports() -> list[tuple[Import, str]]:
    return [(found, rule) for path in source_files() for found in imports_of(path)
            if (rule := broken_rule(found)) is not None]


def test_no_import_goes_the_wrong_way() -> None:
    wrong = wrong_way_imports()
    assert not wrong, "\n".join(f"{found}  ({rule})" for found, rule in wrong)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            following = next((edge for edge in edges if edge in graph), None)
            if following is not None:
                if following not in index:
                    index[following] = low[following] = len(index)
                    stack.append(following)
                    work.append((following, iter(sorted(graph[following]))))
                elif following in stack:
                    low[node] = min(low[node], index[following])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = stack[stack.index(node):]
                del stack[stack.index(node):]
                if len(part) > 1:
                    cycles.append(sorted(part))
    return cycles


def product_import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in source_files():
        importer = module_name(path)
        if within(importer, "workflows", "activities", "hitl") or importer in ENTRY_POINTS:
            graph[importer] = {found.imported for found in imports_of(path) if found.imported != importer}
    return graph


def test_no_import_cycle_among_the_products_modules() -> None:
    cycles = import_cycles(product_import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(cycle) for cycle in cycles)


def test_a_cycle_is_seen() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(("importer", "imported", "rule"), [
    ("workflows.pauses", "hitl.settings", "workflows imports only workflows and hitl.catalog"),
    ("workflows.pauses", "httpx", "workflows imports only the standard library, pydantic, temporalio and cryptography"),
    ("activities.mcp.connection", "hitl.console.render", "activities never import hitl.api, hitl.console, hitl.client or hitl.cli"),
    ("hitl.client.sessions", "hitl.console.render", "hitl.client never imports hitl.api, hitl.console or hitl.cli"),
    ("hitl.api.gateway", "hitl.console.updates", "hitl.api never imports hitl.console"),
    ("hitl.console.chat", "hitl.api.app", "hitl.console never imports hitl.api"),
    ("bench.load", "worker", "nothing imports the entry points worker.py and starter.py"),
    ("tests.integration.test_load", "bench.load", "tests never import bench/: what both need lives in tests/support"),
    ("tests.system.test_bench_smoke", "bench.throughput", "tests never import bench/: what both need lives in tests/support"),
    ("tests.integration.test_inbox", "starter", "nothing imports the entry points worker.py and starter.py"),
    ("hitl.worker", "hitl.console.startup", "the worker never imports hitl.api, hitl.console, hitl.client or hitl.cli"),
    ("hitl.sandbox_runner", "temporalio.worker._command_aware_visitor", "the product imports only the SDK's public modules"),
])
def test_each_rule_catches_what_it_forbids(importer: str, imported: str, rule: str) -> None:
    assert broken_rule(Import(importer, imported, "x.py:1")) == rule


@pytest.mark.parametrize(("importer", "imported"), [
    ("workflows.pauses", "hitl.catalog.schema_tools"),
    ("workflows.proofs", "cryptography.hazmat.primitives.asymmetric.ed25519"),
    ("hitl.api.gateway", "hitl.client.updates"),
    ("hitl.console.chat", "hitl.client.events"),
    ("hitl.cli", "hitl.api.app"),
    ("tests.conftest", "hitl.worker"),
    ("hitl.plugin", "temporalio.worker.workflow_sandbox"),
])
def test_the_allowed_directions_pass(importer: str, imported: str) -> None:
    assert broken_rule(Import(importer, imported, "x.py:1")) is None


def test_from_imports_of_modules_are_resolved_to_the_module() -> None:
    """`from hitl import worker` is an import of hitl.worker, not of the package hitl."""
    assert is_project_module("hitl.worker") and not is_project_module("hitl.nothing_here")


if __name__ == "__main__":
    wrong = wrong_way_imports()
    for found, rule in wrong:
        print(f"{found}  ({rule})")
    print(f"{len(wrong)} wrong-way imports")
