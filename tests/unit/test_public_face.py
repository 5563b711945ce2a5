"""The public face (docs/architecture.md, "The public face"): `hitl.__all__` is exactly what users
write against, each name resolves, and the users' pages' Python imports nothing of the product but it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import hitl

ROOT = Path(__file__).resolve().parents[2]
FACE = ["tool", "ToolContext", "ToolError", "HitlClient", "Session", "Refused", "HitlPlugin", "testing"]
# The product's own top-level modules and packages: a user's page imports none of them but `hitl`'s face.
PRODUCT = {"hitl", "activities", "workflows", "worker", "starter", "tests", "bench", "scripts"}
# The users' pages: the first hour, the interface, and any page about tools.
USERS_PAGES = [ROOT / "README.md", ROOT / "docs" / "interface.md", *sorted((ROOT / "docs").glob("*tool*.md"))]


def test_all_is_exactly_the_face_and_every_name_resolves() -> None:
    assert sorted(hitl.__all__) == sorted(FACE)
    for name in hitl.__all__:
        assert getattr(hitl, name) is not None, name
    assert hitl.testing.Harness is not None


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def product_imports(code: str) -> list[str]:
    """Each import of the product in `code` that is not the face: `import x` / `from x import y` as written."""
    wrong = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            wrong += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in PRODUCT and a.name != "hitl"
                      and a.name != "hitl.testing"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PRODUCT:
            names = [a.name for a in node.names]
            if node.module == "hitl" and set(names) <= set(FACE):
                continue
            if node.module == "hitl.testing":
                continue
            wrong.append(f"from {node.module} import {', '.join(names)}")
    return wrong


def test_the_users_pages_import_only_the_face() -> None:
    blocks = [(page.name, block) for page in USERS_PAGES for block in python_blocks(page)]
    assert any("from hitl import" in block for _, block in blocks), "the pages show the face somewhere"
    wrong = [(name, line) for name, block in blocks for line in product_imports(block)]
    assert not wrong, f"the users' pages import the product's insides: {wrong}"


def test_an_import_of_the_insides_is_caught() -> None:
    assert product_imports("from activities.tools import tool\nimport workflows.contract\n") == [
        "from activities.tools import tool", "import workflows.contract"]
    assert product_imports("from hitl.client.workers import NoWorker\n") == ["from hitl.client.workers import NoWorker"]
    assert product_imports("from hitl import tool, HitlClient\nfrom hitl.testing import Harness\nimport os\n") == []
