"""The tokens file and the operator's policy as they are now: re-read when the file changes.

A token taken out of `HITL_API_TOKENS`, or a person taken out of the policy's
operators, loses access at their next request, and an open event stream at its
next event, not at the API's next restart. Each use compares the file's stat (a
system call, no read). A change that cannot be read keeps the last good
reading and logs why, once: a half-written file must neither lock everyone out
nor open the doors. At start a broken file still stops the server.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, TypeVar

T = TypeVar("T")
Stamp = tuple[int, int, int] | None

log = logging.getLogger("hitl.api")


def stamp_of(path: Path) -> Stamp:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


@dataclass
class Followed(Generic[T]):
    """A file's reading, renewed when the file's stat changes."""

    path: Path
    load: Callable[[Path], T]
    value: T
    stamp: Stamp

    @classmethod
    def read(cls, path: Path, load: Callable[[Path], T]) -> Followed[T]:
        stamp = stamp_of(path)  # before reading: a change made meanwhile is read next time
        return cls(path, load, load(path), stamp)

    def current(self) -> T:
        stamp = stamp_of(self.path)
        if stamp != self.stamp:
            self.stamp = stamp
            try:
                self.value = self.load(self.path)
            except ValueError as error:  # TokenFileError, PolicyError: one line that says why
                log.warning("%s; the API keeps the last good reading", error)
        return self.value


def now(value: Followed[T] | T) -> T:
    """What a followed file says now, or a fixed value as it is (tests and embedders pass those)."""
    return value.current() if isinstance(value, Followed) else value
