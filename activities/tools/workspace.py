"""The one folder the built-in tools may touch, reached without following links.

A path is never resolved as a string. The workspace root is opened as a
directory descriptor and each component is opened from its parent with
O_NOFOLLOW, so a link anywhere inside the workspace is refused rather than
followed; the final act (read, unlink, create, rename) is then done relative
to the parent's descriptor, with no following of links. A folder swapped for
a link between a check and an act changes nothing: the act happens in the
folder that was opened. (The root itself is the operator's setting and may be
reached through links.)

The product keeps its own state in the same folder. RESERVED_FILES and
RESERVED_FOLDERS list it, in this one place; tools refuse those names and,
whatever the spelling or hard link, those files' device and inode.
"""

from __future__ import annotations

import errno
import os
import secrets
import sqlite3
import stat
from contextlib import ExitStack, contextmanager
from pathlib import Path, PurePosixPath
from typing import Iterator

from activities.tools.errors import ToolError

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC  # NONBLOCK: a fifo must not hang a read

BOOKINGS_DB = "bookings.sqlite"
NOTIFICATIONS = "notifications.jsonl"
STATE_FOLDER = ".hitl"  # receipts here; the demo's dev server keeps its database in a folder of this name too
OUTBOX = "outbox"
DRAFTS = "drafts"
# The product's own files at the top of the workspace: no tool may delete,
# read or write them, whatever arguments a model proposes or a person types.
SQLITE_SIDECARS = ("-journal", "-wal", "-shm")
RESERVED_FILES = frozenset({BOOKINGS_DB, *(BOOKINGS_DB + sidecar for sidecar in SQLITE_SIDECARS), NOTIFICATIONS})
RESERVED_FOLDERS = frozenset({STATE_FOLDER, OUTBOX, DRAFTS})
_RESERVED_FOLDED = frozenset(name.casefold() for name in RESERVED_FILES | RESERVED_FOLDERS)

MAX_PATH_BYTES = 4096  # PATH_MAX on Linux; longer paths are refused before they are echoed anywhere
MAX_NAME_BYTES = 255

Identity = tuple[int, int]  # (st_dev, st_ino): the file itself, whatever name reaches it


def path_parts(relative: str) -> list[str]:
    """The components of a path inside the workspace, or a ToolError saying why not."""
    if not isinstance(relative, str) or not relative.strip():
        raise ToolError("an empty path names no file")
    try:
        size = len(relative.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolError("the path is not valid Unicode text") from None
    if size > MAX_PATH_BYTES:
        raise ToolError(f"the path is longer than {MAX_PATH_BYTES} bytes")
    if "\x00" in relative:
        raise ToolError("a path cannot contain a NUL character")
    candidate = PurePosixPath(relative)
    if candidate.is_absolute():
        raise ToolError(f"{relative!r} is absolute; give a path inside the workspace")
    parts = [part for part in candidate.parts if part != "."]
    if ".." in parts:
        raise ToolError(f"{relative!r} leaves the workspace ('..' is not allowed)")
    if not parts:
        raise ToolError(f"{relative!r} names the workspace itself, not a file in it")
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
        raise ToolError(f"a name in {relative!r} is longer than {MAX_NAME_BYTES} bytes")
    return parts


def is_reserved_name(parts: list[str]) -> bool:
    """A path whose first component is one of the product's own (any case: some file systems ignore it)."""
    return parts[0].casefold() in _RESERVED_FOLDED


class Workspace:
    """An open workspace: a descriptor on its root and every folder opened from it.

    Use as a context manager; every descriptor it opened is closed on exit.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._fds = ExitStack()
        self.fd = -1

    def __enter__(self) -> Workspace:
        self.root.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
        self.fd = self._keep(os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC))
        return self

    def __exit__(self, *exc: object) -> None:
        self._fds.close()

    def _keep(self, fd: int) -> int:
        self._fds.callback(os.close, fd)
        return fd

    def open_folder(self, parent: int, name: str, shown: str) -> int:
        """A sub-folder's descriptor; a link or a non-folder in its place is refused."""
        try:
            return self._keep(os.open(name, FOLDER_FLAGS, dir_fd=parent))
        except FileNotFoundError:
            raise ToolError(f"there is no folder {shown!r} in the workspace") from None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                if _is_link(parent, name):
                    raise ToolError(f"{shown!r} is a link; the tools never follow links") from None
                raise ToolError(f"{shown!r} is not a folder") from None
            raise ToolError(f"cannot open {shown!r}: {error.strerror}") from None

    def parent_of(self, relative: str) -> tuple[int, str]:
        """(descriptor of the folder holding `relative`, its last component), walked without links.

        Refuses the product's own files by name here, and the folders on the
        way by identity (a bind mount or another spelling of `.hitl`)."""
        parts = path_parts(relative)
        if is_reserved_name(parts):
            raise ToolError(f"{relative!r} is the product's own state; tools cannot touch it")
        reserved = self.reserved_identities()
        folder = self.fd
        for depth, name in enumerate(parts[:-1], start=1):
            folder = self.open_folder(folder, name, "/".join(parts[:depth]))
            if identity(os.fstat(folder)) in reserved:
                raise ToolError(f"{relative!r} is inside the product's own state; tools cannot touch it")
        return folder, parts[-1]

    def own_folder(self, name: str) -> int:
        """A folder the product writes in (outbox/, drafts/, .hitl/): created private, never a link."""
        try:
            os.mkdir(name, PRIVATE_FOLDER, dir_fd=self.fd)
        except FileExistsError:
            pass
        return self.open_folder(self.fd, name, name + "/")

    def reserved_identities(self) -> set[Identity]:
        """The product's own files and folders as they exist now, and the files in .hitl/."""
        found: set[Identity] = set()
        for name in RESERVED_FILES | RESERVED_FOLDERS:
            status = _lstat(self.fd, name)
            if status is not None and not stat.S_ISLNK(status.st_mode):
                found.add(identity(status))
        try:
            state = os.open(STATE_FOLDER, FOLDER_FLAGS, dir_fd=self.fd)
        except OSError:
            return found
        try:
            with os.scandir(state) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        found.add(identity(entry.stat(follow_symlinks=False)))
        finally:
            os.close(state)
        return found

    def refuse_if_reserved(self, relative: str, status: os.stat_result) -> None:
        if identity(status) in self.reserved_identities():
            raise ToolError(f"{relative!r} is the product's own state (by another name); tools cannot touch it")

    def write_private_file(self, folder: int, name: str, data: bytes) -> None:
        """Write `name` in `folder` atomically, mode 0600, never through a link.

        A fresh partial file is created exclusively and renamed over the
        target: a link at either name is replaced, not written through, and
        a retried call rewrites the same file rather than adding another."""
        partial = f"{name}.partial"
        try:
            os.unlink(partial, dir_fd=folder)
        except FileNotFoundError:
            pass
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, PRIVATE_FILE, dir_fd=folder)
        with os.fdopen(fd, "wb") as sink:
            sink.write(data)
            sink.flush()
            os.fsync(sink.fileno())
        try:
            os.rename(partial, name, src_dir_fd=folder, dst_dir_fd=folder)
        except IsADirectoryError:
            os.unlink(partial, dir_fd=folder)
            raise ToolError(f"a folder is in the way of {name}") from None

    def create_private_file_once(self, folder: int, name: str, data: bytes) -> bool:
        """Create `name` in `folder` with `data`, mode 0600, unless it exists: False then.

        Several processes may race to create the same file (workers started
        together on one workspace); exactly one wins and none sees a partial
        file. Each writes a partial of its own, then links it to `name`, which
        fails for all but the first, and removes its partial either way."""
        partial = f"{name}.{os.getpid()}.{secrets.token_hex(4)}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, PRIVATE_FILE, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as sink:
                sink.write(data)
                sink.flush()
                os.fsync(sink.fileno())
            os.link(partial, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(partial, dir_fd=folder)

    def append_private_file(self, name: str, data: bytes) -> None:
        """Append to a top-level file, creating it 0600; a link in its place is refused."""
        try:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | _CLOEXEC, PRIVATE_FILE, dir_fd=self.fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ToolError(f"{name} in the workspace is a link; refusing to write through it") from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError(f"{name} in the workspace is not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def connect_database(self, folder_name: str | None, name: str) -> sqlite3.Connection:
        """A SQLite database of the product's, created 0600, refused if it or its sidecars are links.

        SQLite opens files by path and follows links, so the file is first
        created (or found) as a regular file through a descriptor, and after
        connecting the path must still name that same file."""
        folder = self.own_folder(folder_name) if folder_name else self.fd
        shown = f"{folder_name}/{name}" if folder_name else name
        for sidecar in SQLITE_SIDECARS:
            status = _lstat(folder, name + sidecar)
            if status is not None and not stat.S_ISREG(status.st_mode):
                raise ToolError(f"{shown}{sidecar} in the workspace is not a regular file; refusing to open the database")
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | _CLOEXEC, PRIVATE_FILE, dir_fd=folder)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EISDIR):
                raise ToolError(f"{shown} in the workspace is a link or a folder; refusing to open the database") from None
            raise
        try:
            expected = identity(os.fstat(fd))
        finally:
            os.close(fd)
        path = self.root / folder_name / name if folder_name else self.root / name
        db = sqlite3.connect(path, timeout=30)
        try:
            opened = os.stat(path)
        except OSError:
            opened = None
        if opened is None or identity(opened) != expected:
            db.close()
            raise ToolError(f"{shown} was replaced while it was being opened; refusing to use it")
        return db


def identity(status: os.stat_result) -> Identity:
    return (status.st_dev, status.st_ino)


def _lstat(folder: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _is_link(folder: int, name: str) -> bool:
    status = _lstat(folder, name)
    return status is not None and stat.S_ISLNK(status.st_mode)


def inside_workspace(workspace: Path, relative: str) -> Path:
    """The path of `relative` in the workspace, if every component is reached without a link.

    For showing and checking a path; tools act through `Workspace`, whose
    descriptors a concurrent rename cannot redirect."""
    with Workspace(workspace) as opened:
        folder, name = opened.parent_of(relative)
        if _is_link(folder, name):
            raise ToolError(f"{relative!r} is a link; the tools never follow links")
    return workspace.resolve().joinpath(*path_parts(relative))
