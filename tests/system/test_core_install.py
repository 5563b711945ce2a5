"""The core install alone: `pip install hitl-agent` with no extra, in a fresh venv.

It holds the worker, the CLI and the HTTP API with its web inbox; no door's
library (Slack, mail, webhooks, single sign-on, AG-UI, A2A, Redis) is there, a
session still runs through the API from start to answer, and a door configured
without its extra stops the process with one line naming the extra. The install
is pinned to requirements.lock (as constraints: the core is a part of it) and
made from a copy of what git would commit, so nothing of the checkout is used.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import venv
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hitl.devserver import free_port
from tests.support.sessions import PATIENCE
from tests.support.stack import ROOT, nobody_listens, private_dev_server, product_env

pytestmark = pytest.mark.system

TOKEN = "core-install-token-0123456789"
DOOR_MODULES = ("slack_sdk", "aiosmtplib", "standardwebhooks", "joserfc", "httpx", "ag_ui", "a2a", "redis")
SCRIPT = [
    {"call": "delete_file", "args": {"path": "notes.txt"}},
    {"call": "ask_user_question", "args": {"question": "Empty the bin too?", "choices": ["yes", "no"]}},
    {"say": "Deleted notes.txt."},
]


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the core install alone; its bin folder."""
    folder = tmp_path_factory.mktemp("core")
    source = copy_of_the_checkout(folder / "source")
    constraints = folder / "constraints.txt"
    constraints.write_text(pins_of(ROOT / "requirements.lock"))
    environment = folder / "venv"
    venv.create(environment, with_pip=False)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(environment / "bin" / "python"), "install", "--quiet",
         "-c", str(constraints), str(source)],
        cwd=folder, capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return environment / "bin"


def copy_of_the_checkout(source: Path) -> Path:
    """What git would commit, copied: an install inside the checkout would leave build/ behind."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


def pins_of(lock: Path) -> str:
    """The lock's `name==version ; marker` lines, without hashes: pip takes no hashes in constraints."""
    return "".join(line.removesuffix("\\").rstrip() + "\n" for line in lock.read_text().splitlines()
                   if line[:1].isalnum())


def run(bin_folder: Path, cwd: Path, *command: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_folder / command[0]), *command[1:]], cwd=cwd, env=product_env(**variables),
                          capture_output=True, text=True, timeout=120)


def test_the_core_install_has_no_door_library(core: Path, tmp_path: Path) -> None:
    found = run(core, tmp_path, "python", "-c",
                "import importlib.util, json; "
                f"print(json.dumps([m for m in {DOOR_MODULES!r} if importlib.util.find_spec(m)]))")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with private_dev_server(tmp_path) as dev:
        yield dev.address


def test_the_core_install_runs_a_session_through_the_api(core: Path, tmp_path: Path, server: str) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("old notes\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "ana"}))
    variables = {"TEMPORAL_ADDRESS": server, "HITL_TASK_QUEUE": "core", "HITL_WORKSPACE": str(workspace)}
    worker = subprocess.Popen([str(core / "hitl-worker")], cwd=tmp_path,
                              env=product_env(**variables, HITL_MODEL=f"scripted:{script}"),
                              stdout=(tmp_path / "worker.log").open("wb"), stderr=subprocess.STDOUT)
    port = free_port()
    api = subprocess.Popen([str(core / "hitl"), "serve", "--port", str(port)], cwd=tmp_path,
                           env=product_env(**variables, HITL_API_TOKENS=str(tokens)),
                           stdout=(tmp_path / "api.log").open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    logs = {"worker": (worker, tmp_path / "worker.log"), "api": (api, tmp_path / "api.log")}
    try:
        page = until(lambda: call(base, "GET", "/"), lambda answer: answer[0] == 200, logs)
        assert "<html" in page[1].lower()
        started = until(lambda: call(base, "POST", "/sessions", {"session_id": "core-1", "message": "delete notes.txt"}),
                        lambda answer: answer[0] != 503, logs)  # 503: the API's client is still connecting
        assert started[0] == 201, started
        approval = until(lambda: pending(base, "core-1"), lambda items: bool(items), logs)[0]
        assert approval["tool"] == "delete_file", approval
        approved = call(base, "POST", f"/sessions/core-1/calls/{approval['call_id']}/approve", {})
        assert approved[0] == 200, approved
        question = until(lambda: pending(base, "core-1"), lambda items: bool(items) and items[0]["call_id"] != approval["call_id"], logs)[0]
        assert question["tool"] == "ask_user_question", question
        answered = call(base, "POST", f"/sessions/core-1/calls/{question['call_id']}/answer", {"answer": "no"})
        assert answered[0] == 200, answered
        until(lambda: call(base, "GET", "/sessions/core-1"),
              lambda answer: answer[0] == 200 and json.loads(answer[1])["state"] == "idle", logs)
        assert not (workspace / "notes.txt").exists()
    finally:
        for process in (api, worker):
            process.terminate()
            process.wait(timeout=30)


def call(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    """(status, body) of one request as ana; status 0 when nothing answered."""
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def pending(base: str, session_id: str) -> list[dict[str, Any]]:
    status, body = call(base, "GET", f"/sessions/{session_id}/pending")
    return json.loads(body) if status == 200 else []


def until(attempt: Callable[[], Any], done: Callable[[Any], bool],
          processes: dict[str, tuple[subprocess.Popen[bytes], Path]], limit: float = 60.0) -> Any:
    """attempt() until done(its result), for `limit` seconds times the tests' patience, while every
    process stays up; a failure shows the logs."""
    deadline = time.monotonic() + limit * PATIENCE
    while True:
        result = attempt()
        if done(result):
            return result
        for name, (process, log) in processes.items():
            assert process.poll() is None, f"{name} stopped: {log.read_text()}"
        assert time.monotonic() < deadline, f"last answer {result!r}; " + "; ".join(
            f"{name}: {log.read_text()}" for name, (_, log) in processes.items())
        time.sleep(0.2)


@pytest.mark.parametrize(("command", "variables", "line"), [
    (("hitl", "serve"), {"HITL_OIDC_ISSUER": "https://id.example.com", "HITL_OIDC_AUDIENCE": "hitl"},
     "error: HITL_OIDC_ISSUER is set but single sign-on is not installed: pip install 'hitl-agent[sso]'"),
    (("hitl", "serve"), {"HITL_API_STATE": "redis://127.0.0.1:1/0"},
     "error: HITL_API_STATE is set but Redis is not installed: pip install 'hitl-agent[redis]'"),
    (("hitl", "serve"), {"HITL_API_PROTOCOLS": "ag-ui"},
     "error: HITL_API_PROTOCOLS=ag-ui is set but AG-UI is not installed: pip install 'hitl-agent[ag-ui]'"),
    (("hitl", "serve"), {"HITL_API_PROTOCOLS": "a2a"},
     "error: HITL_API_PROTOCOLS=a2a is set but A2A is not installed: pip install 'hitl-agent[a2a]'"),
    (("hitl", "serve"), {"HITL_CHANNELS": "slack.json"},
     "error: HITL_CHANNELS slack is set but Slack is not installed: pip install 'hitl-agent[slack]'"),
    (("hitl-worker",), {"HITL_CHANNELS": "slack.json"},
     "worker: HITL_CHANNELS slack is set but Slack is not installed: pip install 'hitl-agent[slack]'"),
    (("hitl-worker",), {"HITL_CHANNELS": "mail.json"},
     "worker: HITL_CHANNELS email is set but mail is not installed: pip install 'hitl-agent[mail]'"),
    (("hitl-worker",), {"HITL_CHANNELS": "webhooks.json"},
     "worker: HITL_CHANNELS webhooks is set but signed webhooks is not installed: pip install 'hitl-agent[webhooks]'"),
])
def test_a_door_configured_without_its_extra_stops_the_process_with_one_line(
        core: Path, tmp_path: Path, command: tuple[str, ...], variables: dict[str, str], line: str) -> None:
    (tmp_path / "slack.json").write_text(json.dumps({"slack": {"bot_token_env": "SLACK_BOT", "signing_secret_env": "SLACK_SIGNING"}}))
    (tmp_path / "mail.json").write_text(json.dumps({"public_url": "https://hitl.example.com",
                                                    "email": {"smtp_url": "smtp://127.0.0.1:25", "from": "hitl@example.com"}}))
    (tmp_path / "webhooks.json").write_text(json.dumps({"webhooks": [{"url": "https://hooks.example.com/hitl", "secret_env": "HOOK_SECRET"}]}))
    (tmp_path / "tokens.json").write_text(json.dumps({TOKEN: "ana"}))
    stopped = run(core, tmp_path, *command, TEMPORAL_ADDRESS=nobody_listens(), HITL_WORKSPACE=str(tmp_path / "workspace"),
                  HITL_API_TOKENS=str(tmp_path / "tokens.json"),
                  SLACK_BOT="xoxb-0", SLACK_SIGNING="secret", HOOK_SECRET="whsec_" + "A" * 32,
                  **{name: str(tmp_path / value) if value.endswith(".json") else value for name, value in variables.items()})
    assert stopped.returncode != 0
    assert stopped.stderr.strip() == line, stopped.stderr
