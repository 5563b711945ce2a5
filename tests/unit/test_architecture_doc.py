"""docs/architecture.md's module table is what scripts/architecture.py writes from the modules' opening lines.

A module added, removed or whose opening line changed, and a table edited by hand, fail here until
`python scripts/architecture.py` rewrites the table; a module without an opening docstring line fails too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture_script", ROOT / "scripts" / "architecture.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script  # dataclasses and exceptions look their module up
    spec.loader.exec_module(script)
    return script


architecture = load_script()


def test_the_pages_module_table_is_the_modules_opening_lines() -> None:
    page = architecture.DOC.read_text()
    assert architecture.with_table(page, architecture.module_table()) == page, (
        "docs/architecture.md's module table differs from the modules' opening lines: run `python scripts/architecture.py`"
    )


def test_the_table_lists_every_module_of_the_packages_and_the_entry_points() -> None:
    table = architecture.module_table()
    modules = [path for top in architecture.PACKAGES for path in (ROOT / top).rglob("*.py")]
    modules += [ROOT / name for name in architecture.ENTRY_POINTS]
    missing = [str(path.relative_to(ROOT)) for path in modules if f"| `{path.relative_to(ROOT).as_posix()}` |" not in table]
    assert not missing and len(modules) > 100
    assert "**hitl/api/a2a/**" in table and "**activities/mcp/**" in table  # subpackages, each a table of its own
    assert "| `workflows/agent.py` | AgentWorkflow: a ReAct loop whose pauses for a person are durable. |" in table


def test_a_module_without_an_opening_line_is_named(tmp_path: Path) -> None:
    for name, text in {"workflows/__init__.py": '"""The session."""\n', "workflows/silent.py": "X = 1\n",
                       "worker.py": '"""The worker."""\n', "starter.py": '"""The command line."""\n'}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    with pytest.raises(architecture.MissingOpening, match="workflows/silent.py has no docstring"):
        architecture.module_table(tmp_path)
    (tmp_path / "workflows" / "silent.py").write_text('"""Quiet, but says what it holds."""\nX = 1\n')
    assert "| `workflows/silent.py` | Quiet, but says what it holds. |" in architecture.module_table(tmp_path)


def test_rewriting_keeps_the_prose_around_the_markers() -> None:
    page = f"# How it is built\n\nprose before\n\n{architecture.BEGIN}\nstale table\n{architecture.END}\n\nprose after\n"
    written = architecture.with_table(page, "| new |\n")
    assert written.startswith("# How it is built\n\nprose before\n\n") and written.endswith(f"{architecture.END}\n\nprose after\n")
    assert "stale table" not in written and "| new |" in written
