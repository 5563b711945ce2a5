"""The user's files docs/interface.md prints under "Testing your own tool": `my_tools.py`,
`test_my_tools.py` and the `script.json` its shell lines write, read from the page so the tests
that run them cannot drift from it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.stack import ROOT

SECTION_START, SECTION_END = "### Testing your own tool", "### Driving sessions from Python"


def users_files(page: Path = ROOT / "docs" / "interface.md") -> dict[str, str]:
    """File name -> text, as printed."""
    text = page.read_text()
    section = text[text.index(SECTION_START):text.index(SECTION_END)]
    files = dict(re.findall(r"```python\n# (\w+\.py)\n(.*?)```", section, re.S))
    [script] = re.findall(r"^echo '(.*)' > script\.json$", section, re.M)
    files["script.json"] = script + "\n"
    return files


def write_users_files(folder: Path) -> dict[str, str]:
    files = users_files()
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return files
