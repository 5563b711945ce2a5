"""Real MCP servers for the MCP tests: mcp-server-git on a repository the test makes, and
mcp-server-time (stdio only) served over streamable HTTP by the mcp SDK's own server pieces.

Nothing here implements a tool: the git and time tools are the published servers'.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import uvicorn
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged
from starlette.applications import Starlette
from starlette.routing import Route

from activities.mcp import McpToolbox, parse_config
from activities.openai_backend import OpenAIBackend
from hitl.devserver import free_port
from tests.support.sessions import SECRET_KEY, Agent, running_agent
from tests.support.fake_openai import FakeOpenAI
from tests.support.stack import ROOT, product_env


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(folder: Path) -> Path:
    """A repository with one commit and one staged file, ready to be committed."""
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "user.name", "Test")
    (repo / "README").write_text("first\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "first commit")
    (repo / "notes.txt").write_text("remember the milk\n")
    git(repo, "add", "notes.txt")
    return repo


def subjects(repo: Path) -> list[str]:
    """Commit subjects, newest first."""
    return git(repo, "log", "--format=%s").splitlines()


def git_server(repo: Path, **extra: Any) -> dict[str, Any]:
    """mcp-server-git, trusted (its read-only tools run without asking), its sandbox granted the
    folder of the repository (the tests' commit hooks write next to it)."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)],
            "trusted": True, "sandbox": {"paths": [str(repo.parent)]}, **extra}


def block_commits(repo: Path, folder: Path) -> tuple[Path, Path]:
    """A pre-commit hook that holds every commit until `release` exists (at most 60 s).

    Each run appends a line to `inside` with the hook's own pid and its
    parent's (the git server, which runs hooks itself), so a test knows the
    call is mid-flight, whom to kill, and how many times a commit was tried.
    Those pids are the sandbox's own: `outer_pid` gives ours."""
    inside, release = folder / "inside-commit", folder / "release-commit"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"""#!/bin/sh
echo "$$ $PPID" >> {inside}
for i in $(seq 600); do [ -e {release} ] && exit 0; sleep 0.1; done
exit 1
""")
    hook.chmod(0o755)
    return inside, release


async def wait_for_file(path: Path, seconds: float = 30) -> str:
    for _ in range(int(seconds * 10)):
        if path.exists():
            return path.read_text()
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} did not appear within {seconds} s")


def processes_running(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z" and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def outer_pid(inner: int, marker: str) -> int:
    """Our pid of a process that knows itself as `inner` (a sandboxed server lives in its own
    pid namespace, so the pids it reports are not ours), among those whose command line has `marker`."""
    for pid in processes_running(marker):
        if not descends_from(pid, os.getpid()):
            continue  # another test's (or run's) sandbox: its pids look the same
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [str(pid)])
        if int(nspid[-1]) == inner:
            return pid
    raise AssertionError(f"no process {inner} (in its namespace) with {marker!r} in its command line")


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


async def gone(marker: str, seconds: float = 15) -> bool:
    for _ in range(int(seconds * 10)):
        if not processes_running(marker):
            return True
        await asyncio.sleep(0.1)
    return False


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@asynccontextmanager
async def mcp_agent(env_client: Any, workspace: Path, servers: dict[str, Any]) -> AsyncIterator[tuple[Agent, FakeOpenAI, McpToolbox]]:
    """A worker with these MCP servers and a scripted model (the real openai client, a loopback server)."""
    with FakeOpenAI() as fake:
        backend = OpenAIBackend(api_key=SECRET_KEY, base_url=fake.base_url, default_model="test-model")
        async with McpToolbox(parse_config({"mcpServers": servers})) as toolbox:
            async for agent in running_agent(env_client, workspace, backend):
                yield agent, fake, toolbox


@contextmanager
def worker_process(address: str, task_queue: str, workspace: Path, servers: dict[str, Any], fake: FakeOpenAI,
                   folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python worker.py` with these MCP servers (a config file in `folder`) and the scripted model,
    for a test to SIGKILL; killed at the end if it still runs. Its output goes to folder/worker.log."""
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    with (folder / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "worker.py"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env=product_env(
                TEMPORAL_ADDRESS=address, HITL_TASK_QUEUE=task_queue, HITL_WORKSPACE=str(workspace),
                HITL_MCP_CONFIG=str(config), HITL_MODEL="test-model", OPENAI_API_KEY=SECRET_KEY,
                OPENAI_BASE_URL=fake.base_url,
            ),
        )
        try:
            yield worker
        finally:
            kill(worker.pid)
            worker.wait(timeout=60)


def tool_results(fake: FakeOpenAI, request: int = -1) -> dict[str, str]:
    """The tool results the model read in one of its requests, by call id."""
    return {m["tool_call_id"]: m["content"] for m in fake.requests[request]["messages"] if m["role"] == "tool"}


def tool_output(text: str, tool: str) -> str:
    """What the server answered, after the product's mark saying it is that tool's output."""
    mark, _, rest = text.partition("\n")
    assert mark == f"[output of tool {tool}; not from a person]", text
    return rest


class TimeOverHttp:
    """mcp-server-time, a stdio server, offered over streamable HTTP by the SDK's server pieces.

    A thin relay: tools are listed and called on the real server. `hide` and
    `announce_change` let a test change the tool list the way a server
    upgrade would, with a `tools/list_changed` notification."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.hidden: set[str] = set()
        self.sessions: set[ServerSession] = set()
        self.changes = InMemorySubscriptionBus()  # how a 2026-07-28 client hears of a change
        self.stack = AsyncExitStack()

    async def __aenter__(self) -> TimeOverHttp:
        read, write = await self.stack.enter_async_context(stdio_client(StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])))
        upstream = await self.stack.enter_async_context(ClientSession(read, write))
        await upstream.initialize()

        async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
            self.sessions.add(context.session)
            return types.ListToolsResult(
                tools=[tool for tool in (await upstream.list_tools()).tools if tool.name not in self.hidden])

        async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await upstream.call_tool(params.name, params.arguments or {})

        server: Server[Any] = Server("time-over-http", on_list_tools=list_tools, on_call_tool=call_tool,
                                     on_subscriptions_listen=ListenHandler(self.changes))
        manager = StreamableHTTPSessionManager(app=server)

        async def endpoint(scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

        app = Starlette(routes=[Route("/mcp", endpoint=_Asgi(endpoint))])
        await self.stack.enter_async_context(manager.run())
        self.http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.serving = asyncio.create_task(self.http.serve())
        while not self.http.started:
            if self.serving.done():  # it could not serve (its port taken meanwhile): say so, not wait for ever
                raise AssertionError(f"mcp-server-time over HTTP did not start on port {self.port}: "
                                     f"{self.serving.exception() or 'uvicorn stopped'}")
            await asyncio.sleep(0.05)
        return self

    async def announce_change(self) -> None:
        await self.changes.publish(ToolsListChanged())
        for session in list(self.sessions):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a client that went away
                self.sessions.discard(session)

    async def stop(self) -> None:
        """Stop serving and stop the real server (again: nothing happens)."""
        self.http.should_exit = True
        await self.serving
        await self.stack.aclose()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()


class _Asgi:
    """Starlette calls a class instance as a raw ASGI app (a function would get a Request)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.handler(scope, receive, send)


ADVERSARY = Path(__file__).resolve().parent / "adversarial_mcp.py"


class Adversary:
    """tests/support/adversarial_mcp.py, a server that lies about its tools and reads what it can: its
    state folder says what it lists and answers, and records each effect it had."""

    def __init__(self, folder: Path, tools: list[dict[str, Any]]) -> None:
        self.state = folder / "adversary"
        self.state.mkdir()
        self.program = folder / "adversary-program" / ADVERSARY.name  # outside the worker's folder
        self.program.parent.mkdir()
        self.program.write_text(ADVERSARY.read_text())
        self.list(tools, path=self.state / "tools.json")

    def entry(self, **extra: Any) -> dict[str, Any]:
        """Its mcpServers entry: sandboxed with only its program and state folder granted."""
        return {"command": sys.executable, "args": [str(self.program), str(self.state)],
                "sandbox": {"paths": [str(self.state)], "read_only": [str(self.program.parent)]}, **extra}

    def list(self, tools: list[dict[str, Any]], path: Path | None = None) -> None:
        """Change the tool list (the server announces it with tools/list_changed)."""
        target = path or self.state / "tools-next.json"
        staged = target.with_suffix(".staged")
        staged.write_text(json.dumps(tools))
        staged.replace(target)

    def page(self, text: str) -> None:
        (self.state / "page.txt").write_text(text)

    def targets(self, *paths: Path | str) -> None:
        (self.state / "targets.json").write_text(json.dumps([str(path) for path in paths]))

    def effects(self) -> list[dict[str, Any]]:
        log = self.state / "effects.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def tool(name: str, **hints: bool) -> dict[str, Any]:
    """A tool definition as the adversary lists it: a name and whatever annotations it claims."""
    return {"name": name, "description": f"{name} (says its server)", "annotations": hints or None}


ASKING = Path(__file__).resolve().parent / "asking_mcp.py"


def asking_server(folder: Path, *flags: str) -> dict[str, Any]:
    """tests/support/asking_mcp.py (the SDK's MCPServer), sandboxed, trusted: its tools run without
    approval, so what waits is only what the server asks. It records each answer it sees in `folder`."""
    return {"command": sys.executable, "args": [str(ASKING), str(folder), *flags], "trusted": True,
            "auto_approve": ["*"], "sandbox": {"paths": [str(folder)], "read_only": [str(ASKING.parent)]}}


def answers_seen(folder: Path) -> list[dict[str, Any]]:
    log = folder / "seen.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
