"""The product as a user installs it: a wheel, in a fresh venv, outside the checkout.

The checkout's own modules are never on sys.path here: the commands run from an
empty folder with the venv's interpreter, and the venv sees the locked
dependencies (already installed in the test environment) through a path line,
not through the test environment's site folder, whose editable install would
put the checkout back. A module that is used but not packaged (a top-level file
left out of pyproject, static files of the web page) fails these commands.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path
from typing import Iterator

import pytest

from hitl.devserver import free_port
from tests.support.sessions import PATIENCE
from tests.support.stack import ROOT, private_dev_server, product_env


TOKEN = "wheel-test-token-0123456789"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the project's wheel installed; its bin folder."""
    folder = tmp_path_factory.mktemp("installed")
    source, dist = folder / "source", folder / "dist"
    # Built from a copy of what git would commit: a build inside the checkout leaves build/ and
    # egg-info behind, and a stale build/ would put deleted modules into the wheel.
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(source)],
                   check=True, cwd=folder, timeout=300)
    wheel = next(dist.glob("hitl_agent-*.whl"))
    environment = folder / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "locked_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", str(wheel)],
                   check=True, cwd=folder, timeout=300)
    return environment / "bin"


def run(bin_folder: Path, cwd: Path, *command: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_folder / command[0]), *command[1:]], cwd=cwd, env=product_env(**variables),
                          capture_output=True, text=True, timeout=120)


def test_the_wheel_holds_the_product_and_nothing_of_the_checkout_is_used(installed: Path, tmp_path: Path) -> None:
    where = run(installed, tmp_path, "python", "-c",
                "import json, hitl.api.web, workflows.agent, activities.model, worker, starter; "
                "print(json.dumps([m.__file__ for m in (hitl.api.web, workflows.agent, activities.model, worker, starter)]))")
    assert where.returncode == 0, where.stderr
    for path in json.loads(where.stdout):
        assert not Path(path).is_relative_to(ROOT), path
        assert Path(path).is_relative_to(installed.parent), path
    static = run(installed, tmp_path, "python", "-c", "import hitl.api.web as w; print(sorted(p.name for p in w.STATIC.iterdir()))")
    assert json.loads(static.stdout.replace("'", '"')) == sorted(p.name for p in (ROOT / "hitl/api/static").iterdir())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with private_dev_server(tmp_path) as dev:
        yield dev.address


def test_the_installed_commands_run_a_session_and_serve_it(installed: Path, tmp_path: Path, server: str) -> None:
    variables = {"TEMPORAL_ADDRESS": server, "HITL_TASK_QUEUE": "installed", "HITL_WORKSPACE": str(tmp_path / "workspace")}
    worker = subprocess.Popen([str(installed / "hitl-worker")], cwd=tmp_path, env=product_env(**variables),
                              stdout=(tmp_path / "worker.log").open("wb"), stderr=subprocess.STDOUT)
    port = free_port()
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "ana"}))
    api = subprocess.Popen([str(installed / "hitl"), "serve", "--port", str(port)], cwd=tmp_path,
                           env=product_env(**variables, HITL_API_TOKENS=str(tokens)),
                           stdout=(tmp_path / "api.log").open("wb"), stderr=subprocess.STDOUT)
    try:
        started = run(installed, tmp_path, "hitl", "start", "please delete notes.txt", "--session", "wheel-1",
                      "--by", "ana", **variables)
        assert started.returncode == 0, started.stderr
        pending = wait_for(lambda: run(installed, tmp_path, "hitl", "--json", "pending", "wheel-1", **variables),
                           lambda done: done.returncode == 0 and json.loads(done.stdout), worker, tmp_path / "worker.log")
        call = json.loads(pending.stdout)[0]
        page = wait_for(lambda: fetch(f"http://127.0.0.1:{port}/"), lambda body: body is not None, api, tmp_path / "api.log")
        assert "<html" in page.lower()
        status = wait_for(lambda: fetch(f"http://127.0.0.1:{port}/sessions/wheel-1", token=TOKEN),
                          lambda body: body is not None, api, tmp_path / "api.log")  # None: only slow, asked again
        assert json.loads(status)["state"] == "awaiting_human"
        approved = run(installed, tmp_path, "hitl", "approve", "wheel-1", "--call", call["call_id"], "--by", "ana", **variables)
        assert approved.returncode == 0, approved.stderr
        closed = wait_for(lambda: fetch(f"http://127.0.0.1:{port}/sessions/wheel-1", token=TOKEN),
                          lambda body: body is not None and json.loads(body)["state"] == "idle", worker, tmp_path / "worker.log")
        assert json.loads(closed)["pending"] == 0
    finally:
        for process in (api, worker):
            process.terminate()
            process.wait(timeout=30)


def fetch(url: str, token: str | None = None) -> str | None:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None


def wait_for(attempt, done, process: subprocess.Popen[bytes], log: Path, limit: float = 60.0):  # type: ignore[no-untyped-def]
    """attempt() until done(result), for `limit` seconds times the tests' patience; the process it
    waits on must stay up meanwhile."""
    deadline = time.monotonic() + limit * PATIENCE
    while True:
        result = attempt()
        if done(result):
            return result
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
