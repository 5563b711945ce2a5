"""The one folder the built-in tools may touch, and the check that keeps them in it."""

from __future__ import annotations

import os
from pathlib import Path

from activities.tools.errors import ToolError


def inside_workspace(workspace: Path, relative: str) -> Path:
    """Resolve `relative` under the workspace, or refuse.

    Refuses absolute paths and `..` outright, then resolves symlinks and
    checks the real target is still inside, so a link cannot lead out.
    """
    if not relative or not relative.strip():
        raise ToolError("an empty path names no file")
    candidate = Path(relative)
    if candidate.is_absolute() or candidate.drive:
        raise ToolError(f"{relative!r} is absolute; give a path inside the workspace")
    if ".." in candidate.parts:
        raise ToolError(f"{relative!r} leaves the workspace ('..' is not allowed)")
    root = workspace.resolve()
    target = Path(os.path.realpath(root / candidate))
    if target != root and root not in target.parents:
        raise ToolError(f"{relative!r} leads outside the workspace")
    return target
