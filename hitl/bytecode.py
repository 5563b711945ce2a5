"""Compiled once per worker: the workflow modules the sandbox runs afresh for every session.

Temporal's sandbox imports a workflow's module anew for each workflow run it
starts (a new session, or one evicted from the worker's cache), so that no run
sees another's module state. Python takes that module's bytecode from
`__pycache__` when it can; with PYTHONDONTWRITEBYTECODE set (common in
containers and CI, and on the benchmarks' machine) or a tree nobody could
write, there is none, and every run compiled workflows/agent.py from source:
70% of what creating a session cost a busy worker (py-spy during
bench/throughput.py).

`compile_once` puts a finder in front of the import system for the named
packages, whose loader keeps each module's code object (immutable) keyed by
its file and modification time. Each run still executes the module in its own
namespace, as the sandbox intends; only the compiling is shared. Nothing is
written anywhere.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
from types import CodeType
from typing import Sequence


class KeptCodeLoader(importlib.machinery.SourceFileLoader):
    """A source loader whose compiled code is kept for as long as the file is unchanged."""

    codes: dict[tuple[str, int], CodeType] = {}
    lock = threading.Lock()  # workflow activations run in several threads

    def get_code(self, fullname: str) -> CodeType:
        key = (self.path, os.stat(self.path).st_mtime_ns)
        code = self.codes.get(key)
        if code is None:
            code = super().get_code(fullname)
            assert code is not None
            with self.lock:
                self.codes[key] = code
        return code


class CompiledOnce(importlib.abc.MetaPathFinder):
    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = tuple(packages)

    def covers(self, fullname: str) -> bool:
        return any(fullname == package or fullname.startswith(package + ".") for package in self.packages)

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not self.covers(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not spec.origin:
            return spec
        spec.loader = KeptCodeLoader(fullname, spec.origin)
        return spec


def compile_once(packages: Sequence[str]) -> None:
    """Keep the compiled code of these packages' modules (idempotent)."""
    for finder in sys.meta_path:
        if isinstance(finder, CompiledOnce):
            finder.packages = tuple(dict.fromkeys((*finder.packages, *packages)))
            return
    sys.meta_path.insert(0, CompiledOnce(packages))
