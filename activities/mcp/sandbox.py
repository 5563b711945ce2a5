"""The bubblewrap sandbox a stdio MCP server runs in by default: it is someone else's program.

Without one it runs with the worker's privileges: as the same user it can read
/proc/<worker pid>/environ (the worker's API and signing keys), the key files
in HITL_KEYS_DIR (./.hitl by default) and everything in the worker's
directory and workspace. Running as root it can do so even from a process the
worker made non-dumpable (root has CAP_SYS_PTRACE), so only a separate view
of the machine stops it:

- new pid, ipc, uts, cgroup, user and (unless the entry grants `network`)
  network namespaces: the worker's processes are not in its /proc;
- every capability dropped, a new session (no TIOCSTI into the worker's
  terminal); it dies with the worker (a SIGKILLed worker leaves no server
  behind, and no call of it finishes after the worker is gone);
- a minimal read-only system: /usr and its /bin, /lib links, a few files of
  /etc, the program's own install (its virtualenv and base interpreter), a
  private /tmp and home; nothing of the worker's directory, workspace or keys;
- the paths the entry grants: `"sandbox": {"paths": [...], "read_only": [...],
  "network": true}`; `"sandbox": false` opts out (warned at start).

Where `bwrap` is not installed, stdio servers run unsandboxed and the worker
says so at start (docs/mcp.md says what holds then). Where it is installed
but cannot make namespaces (a container without the privilege), the servers
do not start (fail closed) and the worker's warning at start says bwrap's
reason: the entry's `"sandbox": false` is then the operator's explicit choice.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from activities.mcp.config import SandboxGrant, ServerEntry

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs commonly read from /etc; never shadow, sudoers, ssh keys, or the rest.
ETC = ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "ld.so.cache",
       "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "ssl", "ca-certificates", "alternatives",
       "mime.types", "gitconfig", "os-release", "debian_version", "protocols", "services", "locale.alias")
PR_SET_DUMPABLE = 4


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def bwrap_problem(bwrap: str) -> str | None:
    """Why this bwrap cannot make a sandbox here (a container without the privilege), or None."""
    try:
        ran = subprocess.run([bwrap, "--unshare-all", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc",
                              "--dev", "/dev", "--", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if ran.returncode != 0:
        return (ran.stderr.strip().splitlines() or [f"exit status {ran.returncode}"])[-1]
    return None


def make_undumpable() -> bool:
    """Linux: no core dumps, and /proc/<pid>/{environ,mem,...} and ptrace refused to other
    processes of the same user (not to root: that is the sandbox's job). True when it held."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def protected_places(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Folders the product keeps secrets or state in: never bound into a sandbox unasked."""
    places = [Path.cwd(), Path(environ.get("HITL_KEYS_DIR", ".hitl")), Path(environ.get("HITL_WORKSPACE", "workspace"))]
    return [place.resolve() for place in places]


def sandboxed_command(entry: ServerEntry, env: Mapping[str, str], bwrap: str) -> tuple[str, list[str]]:
    """bwrap and its arguments that run the entry's command inside its sandbox."""
    grant = entry.sandbox_grant or SandboxGrant()
    command = entry.command or ""
    resolved = shutil.which(command, path=env.get("PATH")) or command
    argv = ["--unshare-all", *(["--share-net"] if grant.network else []), "--new-session", "--die-with-parent", "--cap-drop", "ALL",
            "--tmpfs", "/"]
    for place in SYSTEM:
        path = Path(place)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), place]
        elif path.is_dir():
            argv += ["--ro-bind", place, place]
    for name in ETC:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    home = env.get("HOME", "")
    if home.startswith("/") and home != "/":
        argv += ["--tmpfs", home]
    for program_place in program_places(resolved):
        argv += ["--ro-bind", str(program_place), str(program_place)]
    for place in grant.read_only:
        argv += ["--ro-bind", place, place]
    for place in grant.paths:
        argv += ["--bind", place, place]
    argv += ["--chdir", entry.cwd or "/tmp", "--", resolved, *entry.args]
    return bwrap, argv


def program_places(executable: str) -> list[Path]:
    """What the program needs to run at all: its virtualenv and base interpreter, or its
    install prefix (…/bin/x), or else only the file itself; never a folder holding the
    worker's directory, keys or workspace (a server installed in the worker's folder
    gets that one file, and its entry grants the rest)."""
    path = Path(executable)
    if not path.is_absolute() or any(_under(path, Path(system)) for system in SYSTEM):
        return []
    candidates: list[Path] = []
    venv = path.parent.parent
    config = venv / "pyvenv.cfg"
    if path.parent.name == "bin" and config.is_file():
        candidates.append(venv)
        for line in config.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                candidates.append(Path(value.strip()).resolve().parent)
    real = path.resolve()
    candidates.append(real.parent.parent if real.parent.name == "bin" else real)
    places: list[Path] = []
    protected = protected_places()
    for candidate in candidates:
        if any(_under(secret, candidate) for secret in protected):
            candidate = real if _under(real, candidate) else path
        if not any(_under(candidate, Path(system)) for system in SYSTEM) and candidate not in places:
            places.append(candidate)
    return places


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
