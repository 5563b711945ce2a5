"""Every command the README and its docs pages print works as printed, and prints what they say.

- The README's guided path ("A first hour") and the docs' blocks run in order, each command exactly
  as printed, in a copy of this checkout, by bash with the project's venv first on PATH (and
  `.venv` there, so `source .venv/bin/activate` works as printed); its output is checked. Every
  example has its own session id, so the commands work one after the other: between two commands
  the test only waits, as a person reading would, for the session to pause or answer.
- A `#   refused: ...` line under a command says it must fail with that reason; a ```text block of
  `$ command` lines and their output says what the command prints.
- The "Human in the loop, in depth" blocks run in order against a worker on the default task queue.
- `./demo.sh --session other` runs on a pseudo-terminal with its dev server on free ports
  (TEMPORAL_ADDRESS, HITL_UI_PORT: the README's 7233 and 8233 may be a developer's own demo), from a
  copy whose .venv refuses to install anything; one run has something listening on 7233 and 8233.
- The worker lines for a local OpenAI-compatible server and for your own tools start, say what they
  loaded, and stop on SIGTERM.

`test_every_printed_command_is_run_or_excused` keeps this list honest: a command added to the README
or a docs page fails it until a test runs it or NOT_RUN says why not. Links between the pages resolve.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.offline_model import OfflineModel
from hitl.console.demo import seed_workspace
from hitl.client.inbox import read_inbox
from hitl.devserver import free_port, is_listening, temporal_binary
from tests.support.sessions import eventually, pending_items, query, record_if_asked, settled
from tests.support.mcp_servers import processes_running
from tests.support.dev_environment import dev_environment
from hitl.worker import build_worker

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The README and the reference pages moved out of it: every command they print is run here.
PAGES = [README, *(ROOT / "docs" / name for name in ("interface.md", "production.md", "evidence.md", "architecture.md",
                                                     "ag-ui.md", "a2a.md", "mcp-elicitation.md"))]
# Pages other work writes (the README links to them); a link to one is checked once it exists.
WRITTEN_ELSEWHERE = {"docs/security.md"}
VENV_BIN = Path(sys.executable).parent
DEMO_COMMAND = "./demo.sh --session other"
DEMO_HELP = "./demo.sh --help"
LOCAL_MODEL_WORKER = "OPENAI_API_KEY=none OPENAI_BASE_URL=http://localhost:11434/v1 HITL_MODEL=qwen2.5:3b python worker.py"
OWN_TOOLS_WORKER = "HITL_TOOL_MODULES=my_tools hitl-worker"
GUIDED_SECTION = "### 2. The same, piece by piece"
DEMO_SECTION = "### 1. The demo"
INBOX_SECTION = "## Who waits for whom: the inbox, and following a session live"
API_SECTION = "### 3. People anywhere: the web inbox and the HTTP API"  # run by tests/integration/test_api_readme.py
AG_UI_SECTION = "## AG-UI: `POST /ag-ui`"  # run by tests/integration/test_ag_ui.py
# The protocol pages' examples, run by tests/integration/test_protocol_examples.py.
AG_UI_EXAMPLE = "## An AG-UI client that runs as printed"
A2A_EXAMPLE = "## An A2A client that runs as printed"
MCP_ELICITATION_EXAMPLE = "## A tool server that asks, as printed"
STORY_SECTIONS = (GUIDED_SECTION, "## Driving a session with the `temporal` CLI alone", INBOX_SECTION, API_SECTION)
DEV_SERVER = ("temporal server start-dev --db-filename .hitl/server.db --search-attribute HitlState=Keyword "
              "--search-attribute HitlPendingTools=KeywordList --search-attribute HitlWaitingSince=Datetime "
              "--search-attribute HitlApprovers=KeywordList "
              "--dynamic-config-value history.maxInFlightUpdatePayloads=2000000 "
              "--dynamic-config-value history.transferProcessorMaxPollRPS=1000")
MCP_TOOLS = "HITL_MCP_CONFIG=mcp.json python starter.py tools"
MCP_WORKER = "HITL_MCP_CONFIG=mcp.json python worker.py"
PUBLIC_KEY = "python -m hitl.decision_keys public"
EMAIL_LINK_KEY = "python -m hitl.decision_keys email-link"
IN_DEPTH = ("## Human in the loop, in depth", "## Built-in tools")
NOT_RUN = {
    """python -c 'import base64,os; print("whsec_" + base64.b64encode(os.urandom(24)).decode())'""":
        "prints a fresh random webhook secret; tests/integration/test_signed_webhooks.py signs with secrets of that form",
    "./test.sh": "it runs this very suite: a test cannot run the suite it is part of",
    "python -m aiosmtpd -n -l 127.0.0.1:8025": "a mail server that runs until stopped; tests/system/test_mail_example.py "
                                                "runs it as printed on a free port and reads the mail it prints",
    """echo '[{"call": "refund_payment", "args": {"order_id": "A-17", "amount": 250}}, {"say": "Refunded."}]' '>' script.json""":
        "tests/support/docs_example.py writes the script it prints, for test_building_on_it.py and "
        "test_building_on_it_installed.py",
    "HITL_MODEL=scripted:script.json HITL_TOOL_MODULES=my_tools hitl-worker":
        "a worker that runs until stopped; test_building_on_it_installed.py runs it as printed in the user's folder "
        "(test_building_on_it.py as python .../worker.py) and settles a session through it",
    "python /path/to/hitl-agent/worker.py": "the same worker line with the checkout's worker.py; test_building_on_it.py "
                                            "runs it from the user's folder",
    "python -m pytest": "test_building_on_it.py and test_building_on_it_installed.py run pytest in the user's folder",
    "./test.sh -m unit": "a tier of this very suite (CI runs the whole of it)",
    "./test.sh -k approve -x": "it runs this very suite (a part of it): same reason",
    "HITL_RECORD_HISTORIES=tests/histories ./test.sh": "it runs this very suite and rewrites the replay corpus",
    "HITL_FAULT_SESSIONS=60 ./test.sh -s tests/system/test_fault_drill.py": "the fault drill itself runs in the suite, at 12 sessions",
    "python -m bench.load --sessions 10000": "minutes long; tests/integration/test_load.py runs the same code with 1,000 sessions",
    "python -m bench.compare --sessions 30": "a benchmark of several minutes; it reports numbers, it checks nothing",
    "python -m bench.throughput": "a benchmark of minutes; tests/system/test_bench_smoke.py runs it at tiny sizes",
    "python -m bench.table --runs 4 --sessions 10 --load-sessions 20 --tool-steps 5 --load-rounds 3 --door-rounds 3 "
    "--decisions 3": "a benchmark of minutes; tests/system/test_bench_smoke.py runs it at tiny sizes",
    "python -m bench.doors --rounds 2 --decisions 5 --doors api slack sub-agent":
        "a benchmark of minutes; tests/system/test_bench_smoke.py runs every door at tiny sizes",
    "python -m bench.doors --rounds 2 --decisions 5 --doors api ag-ui a2a":
        "a benchmark of minutes; tests/system/test_bench_smoke.py runs every door at tiny sizes",
    "BENCH_PROFILE=DIR python -m bench.throughput": "the same benchmark under py-spy, which is not a dependency",
    "python -m bench.throughput --sessions 1000 --model-seconds 1 --rounds 1 --designs product":
        "a benchmark of many minutes; tests/system/test_bench_smoke.py runs the same code at tiny sizes",
    "python -m bench.throughput --sessions 10 --tool-steps 5 --rounds 2 --designs product delegating":
        "a benchmark of a minute; tests/system/test_bench_smoke.py runs the delegating design at tiny sizes",
    "python starter.py chat": "the Docker section's chat; the same command with --session runs in the story",
    DEV_SERVER: "a dev server on the README's port 7233; the tests start the same server (hitl/devserver.py) on their own "
                "ports, and test_the_printed_dev_server_registers_what_the_sessions_need checks these flags",
    "temporal server start-dev": "named in prose: the whole line printed above it is checked",
    "temporal workflow reset": "named in the security model; tests/integration/test_authorization.py resets sessions through "
                               "the same frontend call and replays old proofs against them",
    "tail -f workspace/notifications.jsonl": "follows a file for ever; the escalation tests read the same notifications",
    "./demo.sh": "the same script as ./demo.sh --session other, which runs; `demo` is only the default session id",
    "temporal workflow cancel": "named in prose; test_recovery.py cancels a session through Temporal",
    "export 'HITL_ENCRYPTION_KEY=$(python' -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode()))'": 'makes a random key; test_encryption.py makes keys the same way and runs with them',
    'HITL_ENCRYPTION_KEY=... HITL_CODEC_TOKEN=s3cret python starter.py serve': 'test_encryption.py serves the codec endpoint with a real key and token (`...` stands for the key)',
    "temporal workflow show --workflow-id s1 --codec-endpoint http://127.0.0.1:8000/codec --codec-auth 'Bearer s3cret'": 'test_encryption.py runs this command against its own server and port',
    'temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8000/codec': 'starts a long-running server with its UI; test_encryption.py checks the endpoint the UI calls',
    'TEMPORAL_ADDRESS=my-ns.a1b2c.tmprl.cloud:7233 TEMPORAL_NAMESPACE=my-ns.a1b2c TEMPORAL_API_KEY=... python worker.py': 'Temporal Cloud is not reachable here; test_cluster_connection.py runs the worker through TLS with an API key',
    "cat '>' temporal.toml '<<EOF'": 'a profile file; test_cluster_connection.py writes and uses one',
    "'[profile.prod]'": 'part of the profile file above',
    'address = temporal.internal:7233': 'part of the profile file above',
    'namespace = agents': 'part of the profile file above',
    "'[profile.prod.tls]'": 'part of the profile file above',
    'client_cert_path = /etc/hitl/client.pem': 'part of the profile file above',
    'client_key_path = /etc/hitl/client.key': 'part of the profile file above',
    'EOF': 'part of the profile file above',
    'TEMPORAL_CONFIG_FILE=temporal.toml TEMPORAL_PROFILE=prod python starter.py status s1': 'test_cluster_connection.py runs starter.py through a profile against its TLS proxy',
    'temporal operator search-attribute create --namespace default --name HitlState --type Keyword': 'test_devserver.py checks the same attributes, registered at start',
    'temporal operator search-attribute create --namespace default --name HitlPendingTools --type KeywordList': 'as above',
    'temporal operator search-attribute create --namespace default --name HitlWaitingSince --type Datetime': 'as above',
    'temporal operator search-attribute create --namespace default --name HitlApprovers --type KeywordList': 'as above',
    'temporal worker deployment set-current-version --deployment-name hitl-agent --build-id v2': 'test_worker_versioning.py moves a paused session from v1 to v2 this way',
    "cp .env.example .env '&&' chmod 600 .env": 'prepares docker compose, which has no engine here; test_deployment_files.py checks .env.example',
    'docker compose up -d --build': 'these machines have no Docker engine; test_deployment_files.py checks the file',
    'docker compose ps': 'these machines have no Docker engine',
    'docker compose up -d --scale worker=3': 'these machines have no Docker engine; test_scale_out.py runs two workers on one queue',
    'scripts/lock.sh --upgrade-package temporalio': 're-resolves the lock files from PyPI; CI installs from them',
    "git commit pyproject.toml 'requirements*.lock'": 'commits in your checkout',
    'python starter.py serve': 'test_encryption.py runs the server it starts',
    'temporal workflow show': 'named in prose; test_encryption.py runs it',
    'temporal task-queue describe': 'named in prose (where the worker identity shows)',
    'python worker.py --check': 'test_scale_out.py runs the health check',
    'python -m bench.sticky --rounds 3': 'a benchmark of minutes; it reports numbers, it checks nothing',
    'python -m bench.sdk_insides': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.approve_breakdown --sessions 10': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.approve_breakdown --interleave --sessions 30': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.approval_run --sessions 20': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.sdk_insides --rounds 5': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.sdk_insides --rounds 3': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.sticky --burst 1000 --sticky-timeout 1': 'a benchmark of minutes; it reports numbers, it checks nothing',
    'python -m bench.kill --kills 20': 'a benchmark of minutes; it reports numbers, it checks nothing',
    'python -m bench.transcript_read': 'a benchmark of minutes; it reports numbers, it checks nothing',
    'python -m bench.task_timeout': 'a benchmark of minutes; it reports numbers, it checks nothing',
    'python -m bench.shared_state': 'a benchmark of a minute; it reports numbers, it checks nothing',
    'python -m bench.bulk --calls 1000 --per-session 10': 'a benchmark of minutes; it reports numbers, it checks nothing',
    'python -m bench.builds --rounds 3 --load-sessions 40': 'a benchmark of minutes; tests/system/test_bench_builds.py '
                                                             'runs it at tiny sizes',
    'python -m bench.builds --rounds 4 --load-sessions 40': 'a benchmark of minutes; test_bench_builds.py runs it small',
    'HITL_API_REPLICAS=4 docker compose up -d': 'these machines have no Docker engine; test_deployment_files.py checks the '
                                                'replicas, and test_api_replicas.py runs two behind a round-robin proxy',
    'export HITL_API_STATE=redis://redis.internal:6379/0': 'names a Redis this machine does not have; '
                                                           'test_api_shared_state.py runs replicas on a real redis-server',
    'export HITL_SIGNING_KEY=...': 'a placeholder for the replicas\' shared key; test_api_shared_state.py shares one',
    'HITL_API_HOST=0.0.0.0 HITL_API_PORT=8000 python starter.py serve': 'one replica of the recipe above, on a Redis this '
                                                                         'machine does not have; test_api_shared_state.py runs two',
    """curl -X POST '$API/people/me/delegations' -H 'Authorization: Bearer $ANA' -d '{"to": "bob", "until": "2026-12-14T18:00:00Z", "tools": ["delete_file"]}'""":
        'test_stand_ins.py sends this request (with a later `until`) through real HTTP',
    'python starter.py delegate bob --until 2026-12-14T18:00:00Z --tool delete_file':
        'test_stand_ins.py runs starter.py delegate, --list and --end against a test API (the printed time and id are examples)',
    'python starter.py delegate --list': 'test_stand_ins.py runs it',
    'python starter.py delegate --end so-0123456789abcdef': 'test_stand_ins.py runs it with the id the hand-over got',
    'python starter.py inbox --tool refund_payment --arg currency=EUR --older-than 2h':
        'test_bulk_decisions.py runs starter.py inbox with these filters against its own sessions',
    'HITL_API_URL=http://127.0.0.1:8000 HITL_API_TOKEN=... python starter.py inbox --tool refund_payment --approve-all':
        'test_bulk_decisions.py runs --approve-all through a test API with a person\'s token (the address and token are examples)',
    # Quoted from modules' opening lines in docs/architecture.md's generated module table.
    "python scripts/architecture.py": "rewrites that page's module table; tests/unit/test_architecture_doc.py compares "
                                      "the page with what it would write",
    "python starter.py tools": "hitl/console/tools.py's opening line; the README's HITL_MCP_CONFIG=mcp.json python starter.py tools runs",
    "python starter.py watch '<session>'": "hitl/console/watch.py's opening line; tests/integration/test_watch.py runs starter.py watch",
    "python starter.py --help": "starter.py's opening line; tests/system/test_usage_errors.py runs starter.py's help and its refusals",
}


# ------------------------------------------------------------------ the README's text

def page_of(heading: str) -> Path:
    found = [page for page in PAGES if f"\n{heading}\n" in page.read_text()]
    assert len(found) == 1, f"{heading!r} is on {len(found)} pages: {found}"
    return found[0]


def section(start: str, end: str | None = None) -> str:
    """The text under a heading (on whichever page has it) up to `end`, or to the next heading of its
    level or higher (outside code blocks, where `#` starts a comment)."""
    text = page_of(start).read_text()
    begin = text.index(f"\n{start}\n") + 1
    if end:
        return text[begin : text.index(end, begin)]
    level = len(start) - len(start.lstrip("#"))
    lines = text[begin:].splitlines(keepends=True)
    fenced, taken = False, [lines[0]]
    for line in lines[1:]:
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"#{1,%d} " % level, line):
            break
        taken.append(line)
    return "".join(taken)


def all_pages() -> str:
    return "\n".join(page.read_text() for page in PAGES)


def command_lines(block: str) -> list[str]:
    """The commands of a code block as printed: continuation lines joined, comment lines dropped."""
    return [command for command, _ in annotated_commands(block)]


def annotated_commands(block: str) -> list[tuple[str, list[str]]]:
    """Each command with the `#   ` lines printed under it (`#   refused: ...`, `#   {"outcome": ...}`)."""
    found: list[tuple[str, list[str]]] = []
    pending = ""
    for line in (line.strip() for line in block.replace("\\\n", " ").splitlines()):
        if not line:
            continue
        if line.startswith("#") and not pending:
            if found and line.startswith("#   ") and line[4:].startswith(("refused:", "{")):
                found[-1][1].append(line[4:])
            continue
        pending = f"{pending} {line}" if pending else line
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quoted argument goes on to the next line
            continue
        found.append((pending, []))
        pending = ""
    return found


def comment_of(command: str) -> str:
    """A command's trailing comment: what follows the first ` #` outside quotes."""
    for match in re.finditer(r"\s#", command):
        try:
            shlex.split(command[: match.start()])
        except ValueError:
            continue
        return command[match.end() :]
    return ""


def normalised(command: str) -> str:
    return shlex.join(shlex.split(command, comments=True))


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def blocks() -> list[list[tuple[str, list[str]]]]:
    """The `temporal` commands of each bash block in the in-depth section, with the lines printed under them."""
    found = []
    for block in bash_blocks(section(*IN_DEPTH)):
        commands = [(c, notes) for c, notes in annotated_commands(block) if c.startswith("temporal ")]
        if commands:
            found.append(commands)
    return found


def shown_outputs(text: str) -> dict[str, list[str]]:
    """What ```text blocks of `$ command` lines say each command prints: {command: [lines]}."""
    shown: dict[str, list[str]] = {}
    for block in re.findall(r"```text\n(.*?)```", text, re.S):
        lines: list[str] | None = None
        for line in block.splitlines():
            if line.startswith("$ "):
                lines = shown.setdefault(normalised(line[2:]), [])
            elif lines is not None and line.strip():
                lines.append(line)
    return shown


def squashed(line: str) -> str:
    """A printed line, its columns' widths and a leading age (`4s`, `2m`: it is what it is now) aside."""
    return re.sub(r"^\d+[smhd] ", "AGE ", " ".join(line.split()))


def printed_commands() -> list[str]:
    """Every command the README and its pages print: in bash blocks, and in inline code that starts like a command."""
    text = all_pages()
    commands = [c for block in bash_blocks(text) for c in command_lines(block)]
    commands += re.findall(r"`((?:\./\S+\.sh|python |temporal |docker |[A-Z_]+=\S+\s)[^`]*)`", text)
    return list(dict.fromkeys(normalised(c) for c in commands))


# ------------------------------------------------------------------ running them

@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of this checkout as a clone would have it (tracked and new files; no corpus, no state)."""
    copy = tmp_path / "checkout"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if name.startswith("tests/histories/") or not (ROOT / name).is_file():
            continue
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    return copy


def shell_env(address: str | None) -> dict[str, str]:
    """A user's shell: the project's venv first on PATH, none of this test run's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "HITL_", "OPENAI_", "PYTEST_"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    if address:
        env["TEMPORAL_ADDRESS"] = address
    return env


class Printed:
    """The commands of one README block, run one after the other, exactly as printed."""

    def __init__(self, heading: str, cwd: Path, address: str) -> None:
        self.heading = heading
        self.annotated = [found for block in bash_blocks(section(heading)) for found in annotated_commands(block)]
        self.commands = [command for command, _ in self.annotated]
        self.shown = shown_outputs(section(heading))
        self.done = 0
        self.last_stdout = ""
        self.cwd = cwd
        self.env = shell_env(address)

    def take(self, expected: str) -> str:
        assert self.done < len(self.commands), f"{self.heading}: the test runs {expected!r}, the README no longer prints it"
        command = self.commands[self.done]
        assert " ".join(command.split()).startswith(" ".join(expected.split())), (
            f"{self.heading}: the README prints {command!r} where the test expects {expected!r}; update the story")
        self.done += 1
        return command

    async def run(self, expected: str, status: int | None = None) -> str:
        """Run the next printed command; it must exit 0, or fail with the `#   refused:` reason printed
        under it, and print every line a ```text block shows for it."""
        notes = self.annotated[self.done][1]
        command = self.take(expected)
        completed = await asyncio.to_thread(
            subprocess.run, ["bash", "-c", command], cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=90,
        )
        output = completed.stdout + completed.stderr
        self.last_stdout = completed.stdout  # what a script reads (`--json`): notes on stderr stay apart
        refusal = next((note.split("refused:", 1)[1].strip() for note in notes if note.startswith("refused:")), None)
        if refusal:
            assert completed.returncode == 2 and f"refused: {refusal}" in output, (command, completed.returncode, output)
        else:
            assert completed.returncode == (status or 0), (command, completed.returncode, output)
        printed = {squashed(line) for line in output.splitlines()}
        for line in self.shown.get(normalised(command), []):
            assert squashed(line) in printed, (command, f"the page shows {line!r}", output)
        return output

    def start(self, expected: str) -> Background:
        return Background(self.take(expected), self.cwd, self.env)

    def all_run(self) -> None:
        assert self.done == len(self.commands), f"{self.heading}: not run: {self.commands[self.done:]}"


class Background:
    """A long-running printed command (a worker), its output collected in a file.

    bash runs a lone command in its own process (no fork), so SIGTERM reaches the command itself."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.log = cwd / f"background-{time.monotonic_ns()}.log"
        self.process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def says(self, text: str, timeout: float = 60) -> str:
        return await eventually(lambda: asyncio.sleep(0, self.output()), lambda out: text in out, timeout)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


async def fresh_session(client: Client, session_id: str, message: str | None = None) -> WorkflowHandle[Any, Any]:
    """End whatever session has this id, and start it again with `message` (as another person would)."""
    handle = client.get_workflow_handle(session_id)
    try:
        await handle.terminate("the README story starts it afresh")
    except RPCError:
        pass  # not running
    if message is None:
        return handle
    return await client.start_workflow("AgentWorkflow", {"message": message}, id=session_id, task_queue="hitl-agent")


async def pending_kind(handle: WorkflowHandle[Any, Any], kind: str) -> dict[str, Any]:
    [item] = await eventually(lambda: query(handle, "pending"), lambda items: len(items) == 1 and items[0]["kind"] == kind)
    return item


# ------------------------------------------------------------------ the in-depth blocks

@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """This page's own server, as a reader of the README has: its inbox shows the oldest hundred
    waiting items, which on the suite's shared server are other tests' sessions, not the tour's."""
    environment = await dev_environment()
    yield environment
    await environment.shutdown()


@pytest.fixture
async def default_queue_worker(env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Path]:
    workspace = tmp_path / "workspace"
    seed_workspace(workspace)
    monkeypatch.chdir(tmp_path)  # `tail -f workspace/...` style paths resolve here
    since = datetime.now(timezone.utc)
    async with build_worker(env.client, "hitl-agent", OfflineModel(), workspace):
        yield workspace
    await record_if_asked(env.client, "hitl-agent", since)


@pytest.mark.parametrize("commands", blocks(), ids=lambda c: c[0][0].split("--workflow-id ")[1].split()[0])
async def test_readme_block_works_as_printed(env: WorkflowEnvironment, default_queue_worker: Path, commands) -> None:
    environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
    for command, notes in commands:
        argv = shlex.split(command, comments=True)
        workflow_id = argv[argv.index("--workflow-id") + 1]
        if "start" not in argv[:3]:  # a person reads or decides once the session has paused or answered
            handle = env.client.get_workflow_handle(workflow_id)
            await eventually(lambda: query(handle, "status"), lambda s: s["state"] in ("awaiting_human", "idle"))
        argv[0] = temporal_binary()
        completed = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, env=environ, timeout=60)
        output = completed.stdout + completed.stderr
        refusal = next((note.split("refused:", 1)[1].strip() for note in notes if note.startswith("refused:")), None)
        if refusal:
            assert completed.returncode != 0 and refusal in output, (command, output)
        else:
            assert completed.returncode == 0, (command, output)
        for expected in promised_by(command, notes):
            assert expected in output, (command, expected, output)


def promised_by(command: str, notes: list[str]) -> list[str]:
    """What the README says a command prints: the strings its comment quotes (`# kind "review", with
    "result"`, "..." marking an elision) and each `"key": value` of a JSON line printed under it."""
    promised = [quoted.replace(" ...", "").strip() for quoted in re.findall(r'"([^"]+)"', comment_of(command))]
    for note in notes:
        if note.startswith("{"):
            promised += [f"{key}:{as_the_cli_prints(value)}" for key, value in json.loads(note).items()]
    return promised


def as_the_cli_prints(value: Any) -> str:
    """A JSON value as the `temporal` CLI's text output shows it inside an Update's result (Go's map form)."""
    if isinstance(value, list):
        return "[" + " ".join(as_the_cli_prints(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------ the stories on s1

def with_the_venv(checkout: Path) -> None:
    """The copy's .venv is the project's venv, as `./demo.sh` would have made it (so `source .venv/bin/activate` works)."""
    (checkout / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)


async def waiting(client: Client, session_id: str, kind: str | None = None) -> dict[str, Any]:
    """Once the session has paused (for a `kind` call) or answered: what a person sees before typing the next line."""
    handle = client.get_workflow_handle(session_id)
    status = await eventually(lambda: query(handle, "status"), lambda s: s["state"] in ("awaiting_human", "idle", "closed"))
    if kind:
        await pending_kind(handle, kind)
    return status


async def test_the_guided_path_works_as_printed(env: WorkflowEnvironment, checkout: Path) -> None:
    client = env.client
    seed_workspace(checkout / "workspace")  # as the demo left it
    with_the_venv(checkout)
    ids = ["tour-1", "tour-2", "tour-3", "tour-4"]
    for session_id in ids:
        await fresh_session(client, session_id)
    since = datetime.now(timezone.utc)
    printed = Printed(GUIDED_SECTION, checkout, client.service_client.config.target_host)
    await printed.run("source .venv/bin/activate")
    await printed.run("mkdir -p .hitl")  # the server's database folder, on a checkout that never ran the demo
    printed.take(DEV_SERVER)  # the test's own server stands in for it (TEMPORAL_ADDRESS)
    await printed.run("source .venv/bin/activate")
    worker = printed.start("python worker.py")
    try:
        await worker.says("worker: model: the built-in offline model")
        await guided_path(printed, client, checkout / "workspace")
    finally:
        for session_id in ids:
            await fresh_session(client, session_id)
        await record_if_asked(client, "hitl-agent", since)
        assert worker.stop() == 0, worker.output()
    assert "worker: shutting down" in worker.output()
    printed.all_run()


async def guided_path(printed: Printed, client: Client, workspace: Path) -> None:
    await printed.run("source .venv/bin/activate")
    out = await printed.run('python starter.py start "please delete notes.txt" --session tour-1')
    assert out.strip() == "started session tour-1"
    await waiting(client, "tour-1", "approval")
    out = await printed.run("python starter.py pending tour-1")
    assert "call_1" in out and "asked by" in out and "due in 23 h" in out, out
    await printed.run("python starter.py approve tour-1 call_1")
    assert (await settled(client.get_workflow_handle("tour-1")))["last_answer"] == "Deleted notes.txt."
    assert not (workspace / "notes.txt").exists()

    await printed.run("python starter.py start \"please delete travel-policy.md\" --session tour-2 --by ana")
    await waiting(client, "tour-2", "approval")
    await printed.run("python starter.py approve tour-2 --args")
    await settled(client.get_workflow_handle("tour-2"))
    assert (workspace / "travel-policy.md").exists() and not (workspace / "menu.txt").exists()

    await printed.run('python starter.py start "book me a flight to Beijing" --session tour-3 --by ana')
    await waiting(client, "tour-3", "question")
    out = await printed.run("python starter.py answer tour-3 Shanghai")
    assert "outcome=answered" in out, out
    await waiting(client, "tour-3", "question")
    await printed.run('python starter.py answer tour-3 "next friday"')  # refused, as the page says
    out = await printed.run("python starter.py answer tour-3 2026-12-24")
    assert "outcome=answered" in out, out
    await waiting(client, "tour-3", "approval")
    await eventually(lambda: read_inbox(client), lambda inbox: any(item.session_id == "tour-3" for item in inbox.items))
    out = await printed.run("python starter.py inbox")
    assert re.search(r"^ *\d+[smhd]  tour-3 +call_3 +approval +ana \(asserted\) +in 23 h +book_flight", out, re.M), out
    out = await printed.run("python starter.py reject tour-3")
    assert "outcome=rejected" in out, out
    answer = (await settled(client.get_workflow_handle("tour-3")))["last_answer"]
    assert "Rejected by bob; the tool did not run. Reason: too expensive" in answer, answer
    out = await printed.run("python starter.py status tour-3")
    assert "state: idle" in out and "too expensive" in out, out

    out = await printed.run("python starter.py chat --session tour-4")  # its input ends at once: it leaves
    assert "(session tour-4;" in out and "(left session tour-4;" in out, out


async def test_the_temporal_cli_alone_works_as_printed(
    env: WorkflowEnvironment, default_queue_worker: Path, tmp_path: Path
) -> None:
    client, workspace = env.client, default_queue_worker
    ids = ["cli-1", "cli-2", "cli-3", "cli-4"]
    for session_id in ids:
        await fresh_session(client, session_id)
    printed = Printed(STORY_SECTIONS[1], tmp_path, client.service_client.config.target_host)
    try:
        out = await printed.run("temporal workflow start --type AgentWorkflow --task-queue hitl-agent --workflow-id cli-1")
        assert "WorkflowId" in out and "cli-1" in out, out
        await waiting(client, "cli-1", "approval")
        out = await printed.run("temporal workflow query --workflow-id cli-1 --name pending")
        assert "delete_file" in out, out
        await printed.run("temporal workflow signal --workflow-id cli-1 --name approve")
        assert (await settled(client.get_workflow_handle("cli-1")))["last_answer"] == "Deleted notes.txt."

        await printed.run("temporal workflow start --type AgentWorkflow --task-queue hitl-agent --workflow-id cli-2")
        await waiting(client, "cli-2", "approval")
        await printed.run("temporal workflow signal --workflow-id cli-2 --name reject")
        assert "Reason: keep it" in (await settled(client.get_workflow_handle("cli-2")))["last_answer"]
        assert (workspace / "menu.txt").exists()

        await printed.run("temporal workflow start --type AgentWorkflow --task-queue hitl-agent --workflow-id cli-3")
        await waiting(client, "cli-3", "question")
        await printed.run("temporal workflow signal --workflow-id cli-3 --name answer")
        cli_3 = client.get_workflow_handle("cli-3")
        await eventually(lambda: query(cli_3, "pending"), lambda items: bool(items) and "date" in items[0].get("question", ""))
        await printed.run("temporal workflow signal --workflow-id cli-3 --name user_message")
        await eventually(lambda: query(cli_3, "status"), lambda s: s["state"] == "idle" and "invoices" in s["last_answer"])
        out = await printed.run("temporal workflow query --workflow-id cli-3 --name status")
        assert '"idle"' in out and "invoices" in out, out
        out = await printed.run("temporal workflow query --workflow-id cli-3 --name transcript")
        assert "search for invoices" in out and "Shanghai" in out, out

        await printed.run("temporal workflow start --type AgentWorkflow --task-queue hitl-agent --workflow-id cli-4")
        await waiting(client, "cli-4", "approval")
        out = await printed.run("temporal workflow update execute --workflow-id cli-4 --name approve_update")
        assert "approved" in out, out
        cli_4 = client.get_workflow_handle("cli-4")
        await settled(cli_4)
        await printed.run("temporal workflow signal --workflow-id cli-4 --name cancel")
        assert (await cli_4.result())["reason"] == "cancelled: done"
    finally:
        for session_id in ids:
            await fresh_session(client, session_id)
    printed.all_run()


async def test_the_inbox_and_watch_work_as_printed(env: WorkflowEnvironment, default_queue_worker: Path, checkout: Path) -> None:
    client = env.client
    await fresh_session(client, "watch-1")
    printed = Printed(INBOX_SECTION, checkout, client.service_client.config.target_host)
    try:
        await printed.run('python starter.py start "please delete notes.txt" --session watch-1')
        s1 = client.get_workflow_handle("watch-1")
        await pending_kind(s1, "approval")
        # Visibility follows the session by a moment; the commands below each run once.
        await eventually(lambda: read_inbox(client), lambda inbox: any(item.session_id == "watch-1" for item in inbox.items))
        out = await printed.run("python starter.py inbox")
        assert re.search(r"^ *WAITING  SESSION +CALL +KIND +ASKED BY +DUE +WHAT$", out, re.M), out
        assert re.search(r'^ *\d+[smhd]  watch-1 +call_1 +approval +unnamed \(asserted\) +in 23 h +delete_file\(path="notes.txt"\)  \[destructive\]$',
                         out, re.M), out
        out = await printed.run("python starter.py inbox --for ana")
        assert re.search(r"  watch-1 +call_1 +approval  ", out), out
        await printed.run("python starter.py inbox --for ana --json")
        out = printed.last_stdout  # other tests' sessions on this server may add an unreadable-row note on stderr
        [row] = [row for row in json.loads(out) if row["session_id"] == "watch-1"]
        assert (row["call_id"], row["kind"], row["tool"], row["args"]) == ("call_1", "approval", "delete_file", {"path": "notes.txt"})
        out = await printed.run("temporal workflow list --query")
        assert re.search(r"\bwatch-1\b.*AgentWorkflow", out), out

        watch = printed.start("python starter.py watch watch-1")
        await watch.says('delete_file(path="notes.txt") needs approval  call_id=call_1')
        await s1.execute_update("approve_update", {"by": "ana"})
        await watch.says("Agent: Deleted notes.txt.")
        await s1.execute_update("cancel_update", {"reason": "done"})
        await watch.says("(session watch-1 closed)")
        assert await asyncio.to_thread(watch.process.wait, 30) == 0, watch.output()
        assert "call_1 approved by ana" in watch.output()
    finally:
        await fresh_session(client, "watch-1")
    printed.all_run()


# ------------------------------------------------------------------ workers with settings

@pytest.mark.parametrize("command, says", [
    (LOCAL_MODEL_WORKER, "worker: model: "),
    (OWN_TOOLS_WORKER, "extra tools from ['my_tools']"),
])
async def test_a_worker_line_starts_as_printed(env: WorkflowEnvironment, checkout: Path, command: str, says: str) -> None:
    assert command in all_pages()
    my_tools = re.search(r"```python\n# my_tools\.py\n(.*?)```", all_pages(), re.S)
    assert my_tools, "the README's my_tools.py example"
    (checkout / "my_tools.py").write_text(my_tools.group(1))
    worker = Background(command, checkout, shell_env(env.client.service_client.config.target_host))
    try:
        banner = await worker.says(says)
    finally:
        assert worker.stop() == 0, worker.output()
    if command == LOCAL_MODEL_WORKER:
        assert "qwen2.5:3b" in banner and "http://localhost:11434/v1" in banner, banner
        assert "offline" not in banner.split("worker: model:")[1].splitlines()[0]
    else:
        assert "worker: model: the built-in offline model" in banner


async def test_the_mcp_commands_work_as_printed(env: WorkflowEnvironment, checkout: Path) -> None:
    """The README's mcp.json in a git checkout: `starter.py tools` lists the git server's tools with
    their policies and says the unreachable one is missing; the worker starts it and stops it."""
    config = re.search(r"```json\n(\{\"mcpServers\".*?)```", all_pages(), re.S)
    assert config and MCP_TOOLS in all_pages() and MCP_WORKER in all_pages()
    repo = checkout.parent / "repo"  # the config's /srv/repo: outside the worker's folder, granted to the sandbox
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (checkout / "mcp.json").write_text(config.group(1).replace("/srv/repo", str(repo)))
    listed = await asyncio.to_thread(subprocess.run, ["bash", "-c", MCP_TOOLS], cwd=checkout, env=shell_env(None),
                                     capture_output=True, text=True, timeout=90)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    policy = {line.split()[0]: line for line in listed.stdout.splitlines() if line.startswith(("mcp__", "send_email"))}
    assert "needs approval" in policy["mcp__git__git_commit"] and "needs approval" in policy["send_email"]
    assert "runs without asking" in policy["mcp__git__git_status"]
    assert "auto_approve of MCP server git" in policy["mcp__git__git_add"]
    assert "needs approval (destructive)" in policy["mcp__git__git_reset"]
    assert "MCP server docs (streamable HTTP, untrusted): not reachable" in listed.stdout

    worker = Background(MCP_WORKER, checkout, shell_env(env.client.service_client.config.target_host))
    try:
        await worker.says("worker: MCP server git (stdio, trusted, sandboxed): 12 tools")
        servers = [pid for pid in processes_running("mcp-server-git") if os.readlink(f"/proc/{pid}/cwd") == str(checkout)]
        assert servers, worker.output()
    finally:
        assert worker.stop() == 0, worker.output()
    assert all(pid not in processes_running("mcp-server-git") for pid in servers), "the worker left its server running"


# ------------------------------------------------------------------ the demo

def demo_env(term: str = "dumb") -> dict[str, str]:
    """A user's shell for the demo, its dev server on free ports (TEMPORAL_ADDRESS, HITL_UI_PORT): the
    README's 7233 and 8233 may be a developer's own demo, which this one would otherwise attach to."""
    frontend, ui = free_port(), free_port()
    while ui == frontend:
        ui = free_port()
    return {**shell_env(f"127.0.0.1:{frontend}"), "HITL_UI_PORT": str(ui), "TERM": term}


def venv_that_refuses_installs(copy: Path) -> None:
    """The copy's .venv: the real interpreter, marked installed; an attempt to pip install fails loudly.

    demo.sh would otherwise install into the real venv from the copy (or, with
    the old bug, try to install an extra named after the demo's arguments)."""
    bin_folder = copy / ".venv" / "bin"
    bin_folder.mkdir(parents=True)
    python = bin_folder / "python"
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "TEST VENV: refused: pip $*" >&2; exit 97; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    (copy / ".venv" / ".installed").touch()


class Terminal:
    """A command on a pseudo-terminal: read what it shows, type keys, as a person would."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: its own session, the pty as its controlling terminal
            try:
                # A terminal program starts with Ctrl-C and Ctrl-\ at their defaults. A suite run in
                # the background of a non-interactive shell (`./test.sh &`, nohup) has them ignored,
                # and an ignored disposition survives exec: the demo would never hear the Ctrl-C typed.
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGQUIT, signal.SIG_DFL)
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        # A terminal has a size (a pty starts with none, and rich would assume 80 columns).
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
        self.screen = ""
        self.exited = False
        self.cwd = cwd

    def read_until(self, text: str, timeout: float, after: int = 0) -> str:
        """The screen once `text` shows (after position `after`)."""
        deadline = time.monotonic() + timeout
        while text not in self.screen[after:]:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{text!r} never appeared; the terminal shows:\n{self.screen}"
            if select.select([self.fd], [], [], min(remaining, 0.5))[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the other side closed
                    chunk = b""
                if not chunk:
                    assert text in self.screen[after:], f"{text!r} never appeared before the end:\n{self.screen}"
                self.screen += chunk.decode(errors="replace")
        return self.screen

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def kill(self) -> None:
        """On a failure, leave nothing running: the demo and its worker share our child's group; its dev
        server has a group of its own (hitl/devserver.py) and is found by its folder."""
        if not self.exited:
            try:
                os.killpg(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        if Path.cwd().resolve().is_relative_to(self.cwd.resolve()):
            return  # a program run in the suite's own folder: sweeping it would take the suite with it
        for pid in pids_in(self.cwd):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def exit_status(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([self.fd], [], [], 0.1)[0]:  # never a blocking read: a silent program would hold it for ever
                try:
                    self.screen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exited = True
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.1)
        raise AssertionError(f"still running after {timeout}s:\n{self.screen}")


def run_demo(checkout: Path, env: dict[str, str], keys: Iterator[tuple[str, str]]) -> tuple[int, str]:
    terminal = Terminal(["bash", "-c", DEMO_COMMAND], checkout, env)
    try:
        for shown, typed in keys:
            terminal.read_until(shown, timeout=90)
            terminal.type(typed)
        return terminal.exit_status(timeout=60), terminal.screen
    finally:
        terminal.kill()


def test_the_demo_starts_chats_and_leaves_on_ctrl_c_and_ctrl_d(checkout: Path) -> None:
    assert DEMO_COMMAND in all_pages()
    env = demo_env()
    venv_that_refuses_installs(checkout)

    status, screen = run_demo(checkout, env, iter([
        ("You: ", "please delete notes.txt\n"),
        ('⚠ delete_file(path="notes.txt") needs approval', "\x03"),  # Ctrl-C while it waits
    ]))
    assert status == 130, screen  # 128 + SIGINT: the shell's convention for a program left with Ctrl-C
    assert "TEST VENV: refused" not in screen and "Traceback" not in screen, screen
    assert f"(Temporal dev server on {env['TEMPORAL_ADDRESS']}" in screen, screen
    assert f"Web UI http://localhost:{env['HITL_UI_PORT']})" in screen, screen
    assert "(model: the built-in offline model" in screen and "(session other;" in screen, screen
    assert "(left session other; it keeps its place" in screen, screen
    assert not processes_in(checkout), "the demo stopped its dev server and worker"

    status, screen = run_demo(checkout, env, iter([
        ("(reattached to session other)", ""),
        ('⚠ delete_file(path="notes.txt") needs approval', "\x04"),  # Ctrl-D at the prompt
    ]))
    assert status == 0 and "Traceback" not in screen, screen
    assert "(left session other; it keeps its place" in screen, screen
    assert (checkout / "workspace" / "notes.txt").exists(), "nothing was decided, so nothing was deleted"
    assert (checkout / ".hitl" / "temporal.db").exists()
    assert not processes_in(checkout), "the demo stopped its dev server and worker"


def hold_readme_ports() -> tuple[list[socket.socket], list[int]]:
    """Listeners on 7233 and 8233, as a developer's open demo has them: our own sockets where a port
    is free, and the ports something else already listens on (the same case, not ours to watch)."""
    held, others = [], []
    for port in (7233, 8233):
        try:
            held.append(socket.create_server(("127.0.0.1", port)))
        except OSError:
            if not is_listening("127.0.0.1", port):
                pytest.skip(f"port {port} is bound here but nothing listens on it: it cannot stand in for a demo")
            others.append(port)
    return held, others


def test_the_demo_runs_while_another_demo_holds_the_readme_ports(checkout: Path) -> None:
    """A developer's demo listens on 7233 and 8233: the tests' demo starts its own server on its own
    ports, never connects to theirs, and leaves as it should."""
    held, others = hold_readme_ports()
    try:
        env = demo_env()
        venv_that_refuses_installs(checkout)
        status, screen = run_demo(checkout, env, iter([
            ("You: ", "please delete notes.txt\n"),
            ('⚠ delete_file(path="notes.txt") needs approval', "\x03"),
        ]))
        assert status == 130, screen
        assert f"(Temporal dev server on {env['TEMPORAL_ADDRESS']}" in screen, screen
        assert "using the Temporal server already on" not in screen, screen
        assert not processes_in(checkout), "the demo stopped its dev server and worker"
        # Only our own listeners can say nobody connected; ports someone else holds are not ours to watch.
        for listener in held:
            listener.setblocking(False)
            with pytest.raises(BlockingIOError):
                listener.accept()
    finally:
        for listener in held:
            listener.close()
    if others:
        print(f"ports {others} were held by something else already; the demo ran beside it, unwatched")


PROMPTS = ("You: ", "> ", "  reason: ", "  date (date, YYYY-MM-DD): ")


def test_the_demo_prints_what_the_readme_shows(checkout: Path) -> None:
    """The README's demo session, typed as printed on a real terminal: the demo prints every line it shows."""
    [shown] = re.findall(r"```text\n(.*?)```", section(DEMO_SECTION), re.S)
    venv_that_refuses_installs(checkout)
    # A terminal 140 columns wide, as rich sees one (it takes a "dumb" one for 80 columns and wraps there).
    terminal = Terminal(["bash", "-c", DEMO_COMMAND], checkout, demo_env("xterm-256color"))
    try:
        typed_from = 0
        for line in shown.splitlines():
            prompt = next((p for p in PROMPTS if line.startswith(p) and len(line) > len(p)), None)
            if prompt is None:
                continue
            terminal.read_until(prompt, timeout=90, after=typed_from)
            typed_from = len(terminal.screen)
            terminal.type(line[len(prompt):] + "\n")
        terminal.read_until(shown.splitlines()[-1], timeout=90, after=typed_from)
        terminal.type("\x04")
        assert terminal.exit_status(timeout=60) == 0, terminal.screen
    finally:
        terminal.kill()
    # The spinner line is erased (ESC[2K) and redrawn between printed lines: an erase ends a line too.
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.screen.replace("\x1b[2K", "\n"))
    printed = {line.rstrip() for line in re.split(r"[\r\n]+", plain)}
    missing = [line for line in shown.splitlines() if line.rstrip() not in printed]
    assert not missing, f"the README shows lines the demo does not print: {missing}\n{terminal.screen}"


def test_a_second_demo_in_the_same_folder_refuses_in_one_line(checkout: Path) -> None:
    """Two demos would share one dev server and session, and the first one's Ctrl-C would stop the
    server under the second: the second says so and stops, and the first goes on."""
    env = demo_env()
    venv_that_refuses_installs(checkout)
    first = Terminal(["bash", "-c", DEMO_COMMAND], checkout, env)
    try:
        first.read_until("You: ", timeout=90)
        second = subprocess.run(["bash", "-c", DEMO_COMMAND], cwd=checkout, env=env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=90)
        assert second.returncode == 1, second.stdout + second.stderr
        [line] = second.stderr.strip().splitlines()
        assert line.startswith("error: another ./demo.sh is running from this folder (pid "), line
        first.type("please delete notes.txt\n")
        first.read_until('⚠ delete_file(path="notes.txt") needs approval', timeout=90)
        first.type("\x04")
        assert first.exit_status(timeout=60) == 0, first.screen
    finally:
        first.kill()
    assert not processes_in(checkout)


def test_demo_help_describes_its_options(checkout: Path) -> None:
    venv_that_refuses_installs(checkout)
    assert DEMO_HELP in all_pages()
    shown = subprocess.run(["bash", "-c", DEMO_HELP], cwd=checkout, env=shell_env(None), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: ./demo.sh [--session ID] [--by NAME]"), shown
    for option in ("--session ID", "--by NAME", "OPENAI_API_KEY", "TEMPORAL_ADDRESS", "/help"):
        assert option in shown.stdout, option
    assert not (checkout / ".hitl").exists(), "--help starts nothing"



@pytest.mark.parametrize("argv, line", [
    ("./demo.sh --bogus", "./demo.sh: error: unknown option --bogus (`./demo.sh --help` lists the options)"),
    ("./demo.sh --session", "./demo.sh: error: --session needs a value (`./demo.sh --help` lists the options)"),
])
def test_a_mistyped_demo_option_is_the_demos_own_one_line(checkout: Path, argv: str, line: str) -> None:
    """demo.sh passed whatever it got to `starter.py demo`, whose usage is not the demo's."""
    venv_that_refuses_installs(checkout)
    refused = subprocess.run(["bash", "-c", argv], cwd=checkout, env=demo_env(), stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", line + "\n")
    assert not (checkout / ".hitl").exists(), "a mistyped demo starts nothing"

def pids_in(folder: Path) -> list[int]:
    """The processes running in `folder` (a dev server left behind, say)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")).is_relative_to(folder):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def processes_in(folder: Path) -> list[str]:
    """Command lines of the processes still running in `folder`."""
    found = []
    for pid in pids_in(folder):
        try:
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


# ------------------------------------------------------------------ the list itself

def test_every_printed_command_is_run_or_excused() -> None:
    run_elsewhere = {DEMO_COMMAND, DEMO_HELP, LOCAL_MODEL_WORKER, OWN_TOOLS_WORKER, MCP_TOOLS, MCP_WORKER, PUBLIC_KEY,
                     EMAIL_LINK_KEY}
    stories = [c for heading in (*STORY_SECTIONS, AG_UI_SECTION, AG_UI_EXAMPLE, A2A_EXAMPLE) for block in bash_blocks(section(heading))
               for c in command_lines(block)]
    in_depth = [c for commands in blocks() for c, _ in commands]
    run = {normalised(c) for c in [*stories, *in_depth, *run_elsewhere]}
    unaccounted = [c for c in printed_commands() if c not in run and c not in NOT_RUN]
    assert not unaccounted, f"README commands no test runs (run them, or say in NOT_RUN why not): {unaccounted}"
    stale = [command for command in NOT_RUN if command not in printed_commands()]
    assert not stale, f"NOT_RUN lists commands the README no longer prints: {stale}"


def test_the_printed_dev_server_registers_what_the_sessions_need() -> None:
    from hitl.devserver import SEARCH_ATTRIBUTES, TRANSFER_QUEUE_FLAGS, UPDATE_LIMIT_FLAGS

    assert DEV_SERVER in printed_commands()
    flags = shlex.split(DEV_SERVER)
    registered = dict(flags[i + 1].split("=") for i, flag in enumerate(flags) if flag == "--search-attribute")
    assert registered == SEARCH_ATTRIBUTES
    # The Update limit the embedded server sets (hitl/devserver.py): without it an Update too
    # large to answer is admitted, and its echo fails the task that holds it.
    assert " ".join(UPDATE_LIMIT_FLAGS) in DEV_SERVER
    assert " ".join(TRANSFER_QUEUE_FLAGS) in DEV_SERVER


def test_every_link_between_the_pages_resolves() -> None:
    def anchors(page: Path) -> set[str]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in re.findall(r"(?m)^#+ (.*)$", text)}

    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            name, _, anchor = target.partition("#")
            linked = (page.parent / name).resolve() if name else page
            if not linked.exists():
                if str(linked.relative_to(ROOT)) not in WRITTEN_ELSEWHERE:
                    broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in anchors(linked):
                broken.append(f"{page.name}: {target}")
    assert not broken, broken


def test_the_readme_is_one_screen_and_a_guided_path() -> None:
    """The first screen says what it is and gives the demo and the test command; the reference lives in docs/."""
    text = README.read_text()
    first_screen = "\n".join(text.splitlines()[:70])
    assert "./demo.sh" in first_screen and "./test.sh" in first_screen
    assert len(text.splitlines()) < 260, "the reference belongs in docs/"
    for page in ("docs/interface.md", "docs/production.md", "docs/evidence.md", "docs/security.md", "docs/mcp.md"):
        assert f"]({page}" in text, f"the README links {page}"


def test_files_the_pages_ask_you_to_create_are_git_ignored(tmp_path: Path) -> None:
    for name in ("tokens.json", "mcp.json", "my_tools.py", "temporal.toml", ".env", "workspace/notes.txt", ".hitl/server.db"):
        ignored = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT, capture_output=True)
        assert ignored.returncode == 0, f"{name} would show in `git status` after following the README"


def test_the_printed_public_key_is_the_one_that_verifies_the_apis_proofs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64
    from datetime import datetime, timezone

    from hitl import decision_keys
    from workflows.proofs import sign_decision, verify_decision

    seed = base64.b64encode(bytes(range(32))).decode()
    environment = {**os.environ, "HITL_SIGNING_KEY": f"k1:{seed}", "HITL_KEYS_DIR": str(tmp_path)}
    printed = subprocess.run([sys.executable, *PUBLIC_KEY.split()[1:]], cwd=ROOT, env=environment,
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    key_id, public = printed.split(":", 1)
    monkeypatch.setenv("HITL_SIGNING_KEY", f"k1:{seed}")
    signer_id, key = decision_keys.signing_key()
    proof = sign_decision(key, signer_id, session_id="s", call_id="c", action="approve", by="ana", args_sha256="x")
    assert verify_decision(proof, {key_id: public}, datetime.now(timezone.utc)).by == "ana"


def test_the_printed_email_link_key_makes_links_the_api_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker given the printed HITL_EMAIL_LINK_KEY makes links the API (holding the signing key) reads;
    the printed key is not the signing seed."""
    import base64

    from hitl import decision_keys
    from hitl.email_links import LinkClaims, make_link_token, read_link_token

    seed = base64.b64encode(bytes(range(32))).decode()
    environment = {**os.environ, "HITL_SIGNING_KEY": f"k1:{seed}", "HITL_KEYS_DIR": str(tmp_path)}
    printed = subprocess.run([sys.executable, *EMAIL_LINK_KEY.split()[1:]], cwd=ROOT, env=environment,
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert printed != seed
    monkeypatch.delenv("HITL_SIGNING_KEY", raising=False)
    monkeypatch.setenv("HITL_KEYS_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("HITL_EMAIL_LINK_KEY", printed)
    claims = LinkClaims(person="ana", session_id="s", call_id="c", args_sha256="x", verb="approve", expires=2**40, mail="m")
    token = make_link_token(decision_keys.worker_email_link_key(), claims)
    monkeypatch.setenv("HITL_SIGNING_KEY", f"k1:{seed}")
    assert read_link_token(decision_keys.email_link_key(), token, now=0) == claims
