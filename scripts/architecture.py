"""docs/architecture.md's module table, written from the modules' own opening lines.

Every module of workflows/, activities/ and hitl/ (their subpackages too), worker.py and
starter.py, with the first line of its docstring, one table per package. `python
scripts/architecture.py` rewrites the table between the page's markers and leaves its prose
alone; tests/unit/test_architecture_doc.py fails while the page differs from what this writes.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("workflows", "activities", "hitl")
ENTRY_POINTS = ("worker.py", "starter.py")
BEGIN = "<!-- module table: written by scripts/architecture.py from each module's opening line -->"
END = "<!-- end of module table -->"


class MissingOpening(Exception):
    """A module whose docstring does not open with a line saying what it holds."""


def opening_line(path: Path, root: Path = ROOT) -> str:
    """The first line of the module's docstring."""
    docstring = ast.get_docstring(ast.parse(path.read_text(), str(path)))
    line = docstring.strip().splitlines()[0].strip() if docstring and docstring.strip() else ""
    if not line:
        raise MissingOpening(f"{path.relative_to(root).as_posix()} has no docstring saying what it holds")
    return line


def groups(root: Path = ROOT) -> list[tuple[str, list[Path]]]:
    """Each package (a folder with __init__.py) and its own modules, the package's __init__ first;
    then the entry points."""
    found: list[tuple[str, list[Path]]] = []
    for top in PACKAGES:
        for init in sorted((root / top).rglob("__init__.py")):
            folder = init.parent
            modules = sorted(path for path in folder.glob("*.py") if path.name != "__init__.py")
            found.append((f"{folder.relative_to(root).as_posix()}/", [init, *modules]))
    found.append(("entry points", [root / name for name in ENTRY_POINTS]))
    return found


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def module_table(root: Path = ROOT) -> str:
    """The markdown between the markers: a table per package, each module with its opening line."""
    parts: list[str] = []
    for package, modules in groups(root):
        parts += [f"**{package}**", "", "| Module | What it holds |", "| --- | --- |"]
        parts += [f"| `{path.relative_to(root).as_posix()}` | {cell(opening_line(path, root))} |" for path in modules]
        parts.append("")
    return "\n".join(parts)


def with_table(page: str, table: str) -> str:
    """The page with the text between its markers replaced by `table`."""
    before, begin, rest = page.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"docs/architecture.md lacks the markers {BEGIN!r} and {END!r}")
    return f"{before}{BEGIN}\n\n{table}\n{END}{after}"


def main() -> int:
    try:
        written = with_table(DOC.read_text(), module_table())
    except (MissingOpening, ValueError) as error:
        print(f"scripts/architecture.py: {error}", file=sys.stderr)
        return 1
    changed = written != DOC.read_text()
    DOC.write_text(written)
    print(f"docs/architecture.md: module table {'rewritten' if changed else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
