"""python worker.py: run the agent workflow and its activities on HITL_TASK_QUEUE."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import sys
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from activities.mcp import McpConfigError, McpToolbox, toolbox_from_env
from activities.mcp.sandbox import make_undumpable
from activities.notify import NotifyActivities
from activities.observed_model import observed
from activities.judging import catalog_verdicts, judge_calls, unknown_tools
from activities.model import ModelActivities, ModelBackend, backend_from_env
from activities.session_environment import SessionEnvironment
from activities.message_channels import MessageChannel
from activities.webhooks import SignedWebhook, shown_url, signed_webhooks
from activities.transcript_index import keep_transcript_index, record_transcript_index
from activities.run_tool import ToolActivities
from activities.scripted_model import ScriptError, ScriptedModel
from activities.tools import CATALOG
from activities.workspace_identity import refuse_another_workspace, with_workspace, without_workspace
from hitl.startup import model_warning, quiet_expected_failures
from hitl import heartbeat, telemetry
from hitl.arguments import OneLineParser
from hitl.channels import Channels, ChannelsError, channels_from_env
from hitl.decision_keys import KeyConfigError, worker_email_link_key
from hitl.exit_cleanly import exit_with
from hitl.extras import MissingExtra, require
from hitl.plugin import HitlPlugin
from hitl.sdk_shortcuts import ShortcutSettingError, check_settings
from hitl.settings import Settings, connect, unreachable
from workflows.agents import AgentsError, agents_from_env
from workflows.policy import OperatorPolicy, PolicyError, policy_from_env


T = TypeVar("T")

VERSIONING_BEHAVIORS = {"auto_upgrade": VersioningBehavior.AUTO_UPGRADE, "pinned": VersioningBehavior.PINNED}
SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


@dataclass(frozen=True)
class WorkerTuning:
    """What an operator tunes per deployment (docs/production.md, "Running workers in production").

    The defaults are the SDK's except two. Graceful shutdown is 0 s here (the
    SDK's, for in-process workers in tests and the demo) but 10 s for
    `python worker.py` (`from_env`). The sticky timeout is 1 s, not the SDK's
    10 s: a worker keeps each session
    it ran in a cache and asks the server to send that session's next task to
    it alone (its sticky queue). When the worker dies without saying goodbye
    (SIGKILL, OOM, a lost node) the server holds the task for that long before
    any other worker may take it: a person who approves meanwhile waits.
    """

    max_cached_workflows: int = 1000
    max_concurrent_activities: int = 100
    max_concurrent_workflow_tasks: int = 100
    sticky_timeout_seconds: float = 1.0
    graceful_shutdown_seconds: float = 0.0
    identity: str | None = None
    build_id: str | None = None
    deployment_name: str | None = None
    versioning_behavior: str = "auto_upgrade"
    # Temporal's sandbox re-runs the workflow's module per session and checks every call it makes;
    # off, a busy worker spends about a third less CPU per step (docs/evidence.md), and what the
    # sandbox would catch is left to the tests, which always run with it (docs/production.md).
    sandbox: bool = True
    connect_patience_seconds: float = 60.0  # how long `python worker.py` waits for its server at start

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> WorkerTuning:
        def number(name: str, default: float) -> float:
            text = environ.get(name, "").strip()
            try:
                return float(text) if text else default
            except ValueError:
                raise SystemExit(f"worker: {name} must be a number, not {text!r}") from None

        sandbox = environ.get("HITL_WORKFLOW_SANDBOX", "on").strip().lower() or "on"
        if sandbox not in SWITCH:
            raise SystemExit(f"worker: HITL_WORKFLOW_SANDBOX must be on or off, not {sandbox!r}")
        behavior = environ.get("HITL_VERSIONING_BEHAVIOR", "auto_upgrade").strip().lower()
        if behavior not in VERSIONING_BEHAVIORS:
            raise SystemExit(f"worker: HITL_VERSIONING_BEHAVIOR must be one of {', '.join(VERSIONING_BEHAVIORS)}")
        return cls(
            max_cached_workflows=int(number("HITL_WORKFLOW_CACHE_SIZE", cls.max_cached_workflows)),
            max_concurrent_activities=int(number("HITL_MAX_CONCURRENT_ACTIVITIES", cls.max_concurrent_activities)),
            max_concurrent_workflow_tasks=int(
                number("HITL_MAX_CONCURRENT_WORKFLOW_TASKS", cls.max_concurrent_workflow_tasks)
            ),
            sticky_timeout_seconds=number("HITL_STICKY_TIMEOUT_SECONDS", cls.sticky_timeout_seconds),
            # A deploy's SIGTERM lets running model calls and tools finish this long.
            graceful_shutdown_seconds=number("HITL_GRACEFUL_SHUTDOWN_SECONDS", 10.0),
            identity=environ.get("HITL_WORKER_IDENTITY") or None,
            build_id=environ.get("HITL_BUILD_ID") or None,
            deployment_name=environ.get("HITL_DEPLOYMENT_NAME") or None,
            versioning_behavior=behavior,
            sandbox=SWITCH[sandbox],
            connect_patience_seconds=number("HITL_CONNECT_PATIENCE_SECONDS", cls.connect_patience_seconds),
        )

    def worker_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "max_cached_workflows": self.max_cached_workflows,
            "max_concurrent_activities": self.max_concurrent_activities,
            "max_concurrent_workflow_tasks": self.max_concurrent_workflow_tasks,
            "sticky_queue_schedule_to_start_timeout": timedelta(seconds=self.sticky_timeout_seconds),
            "graceful_shutdown_timeout": timedelta(seconds=self.graceful_shutdown_seconds),
        }
        if self.identity:
            options["identity"] = self.identity
        if self.deployment_name:
            if not self.build_id:
                raise SystemExit("worker: HITL_DEPLOYMENT_NAME needs HITL_BUILD_ID (worker versioning)")
            # Worker versioning: the server routes each session's tasks to a
            # build of this deployment (see docs/production.md, "Deploying a new build").
            options["deployment_config"] = WorkerDeploymentConfig(
                version=WorkerDeploymentVersion(self.deployment_name, self.build_id),
                use_worker_versioning=True,
                default_versioning_behavior=VERSIONING_BEHAVIORS[self.versioning_behavior],
            )
        elif self.build_id:
            options["build_id"] = self.build_id  # recorded in history, no routing
        return options

    def describe(self) -> str:
        text = (f"cache {self.max_cached_workflows} sessions, {self.max_concurrent_activities} activities, "
                f"sticky timeout {self.sticky_timeout_seconds:g} s, graceful shutdown {self.graceful_shutdown_seconds:g} s")
        if not self.sandbox:
            text += ", workflow sandbox off"
        if self.build_id:
            text += f", build {self.build_id}"
        if self.deployment_name:
            text += f" of deployment {self.deployment_name} ({self.versioning_behavior})"
        return text


# What build_worker runs with when given no tuning (in-process workers: tests, the demo).
# The tests' every-task-replays tier replaces it with a cache of 0 (tests/conftest.py).
DEFAULT_TUNING = WorkerTuning()


def session_activities(model: ModelActivities, tools: ToolActivities, notify: NotifyActivities,
                       environment: SessionEnvironment) -> list[Callable[..., Any]]:
    """Every activity of workflows/contract.py's ACTIVITIES, by method reference (each declares
    its contract name); tests/unit/test_contract.py checks that the two name the same set."""
    return [model.call_model, tools.run_tool, notify.notify, unknown_tools, catalog_verdicts, judge_calls,
            environment.session_environment, environment.session_facts, keep_transcript_index,
            record_transcript_index]


def build_worker(
    client: Client,
    task_queue: str,
    backend: ModelBackend,
    workspace: Path,
    notify_url: str | None = None,
    tools: ToolActivities | None = None,
    tuning: WorkerTuning | None = None,
    webhooks: list[SignedWebhook] | None = None,
    message_channels: list[MessageChannel] | None = None,
) -> Worker:
    workspace.mkdir(parents=True, exist_ok=True)
    model, notify = ModelActivities(observed(backend), client), NotifyActivities(workspace, notify_url, webhooks, message_channels)
    environment = SessionEnvironment(client)
    tools = tools or ToolActivities(workspace)
    tuning = tuning or DEFAULT_TUNING
    plugin = HitlPlugin(session_activities(model, tools, notify, environment), sandbox=tuning.sandbox)
    return Worker(client, task_queue=task_queue, plugins=[plugin], **tuning.worker_options())


def describe_policy(policy: OperatorPolicy | None) -> str:
    if policy is None:
        return "none (HITL_POLICY is not set): the tools' own settings are the floor"
    return (f"{os.environ['HITL_POLICY']}: {len(policy.tools)} tool rules, {len(policy.groups)} groups, "
            f"sessions verified {policy.sessions.verified}; read again for every call judged")


class ToolModulesError(Exception):
    """A module HITL_TOOL_MODULES names cannot be found, or imports one that cannot."""


def load_tool_modules() -> list[str]:
    """Modules named in HITL_TOOL_MODULES register their @tool functions on import."""
    names = [name.strip() for name in os.environ.get("HITL_TOOL_MODULES", "").split(",") if name.strip()]
    if names:
        searched_from_the_current_folder()
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            raise ToolModulesError(missing_module_line(name, error)) from None
    return names


def searched_from_the_current_folder() -> None:
    """`python /path/to/worker.py` and `hitl-worker` put the script's folder on sys.path, not the
    one they start in; a user's my_tools.py sits in the latter, so it is searched too, as under
    `python -m` (but last, so a file there never shadows an installed module)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


def missing_module_line(named: str, error: ModuleNotFoundError) -> str:
    """The module itself is not found (a typo, another folder), or it imports one that is not installed."""
    if error.name is not None and named != error.name and not named.startswith(error.name + "."):
        return f"HITL_TOOL_MODULES: {named} imports {error.name!r}, which is not installed"
    return (f"HITL_TOOL_MODULES: no module named {named!r} (a module name, not a file: my_tools.py in the "
            f"folder the worker starts in, or on PYTHONPATH, is `my_tools`)")


async def connect_with_patience(settings: Settings, patience_seconds: float) -> Client:
    """The server may still be starting (docker compose starts both at once): retried every
    2 s for `patience_seconds`, said once, then given up (exit 1) with the same line."""
    deadline = asyncio.get_running_loop().time() + patience_seconds
    said = False
    while True:
        try:
            return await connect(settings)
        except RuntimeError as error:
            if asyncio.get_running_loop().time() >= deadline:
                raise SystemExit(f"worker: gave up after {patience_seconds:g} s: {unreachable(settings, error)}") from None
            if not said:
                print(f"worker: {unreachable(settings, error)}; retrying for up to {patience_seconds:g} s "
                      "(HITL_CONNECT_PATIENCE_SECONDS)", file=sys.stderr, flush=True)
                said = True
            await asyncio.sleep(min(2.0, max(0.0, deadline - asyncio.get_running_loop().time())))


async def pollers(client: Client, task_queue: str) -> set[str]:
    """Identities of the workers polling a task queue for workflow tasks now, as configured
    (without the workspace each names: activities/workspace_identity.py)."""
    answer = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    ))
    return {without_workspace(poller.identity) for poller in answer.pollers}


def health_check() -> int:
    """`python worker.py --check`: 0 when the worker that beats into HITL_WORKER_HEARTBEAT polls (hitl/heartbeat.py)."""
    alive, line = heartbeat.check(heartbeat.heartbeat_file())
    print(f"worker: {line}")
    return 0 if alive else 1


async def main() -> None:
    make_undumpable()  # its environment holds the keys: not readable through /proc by its own user's other processes
    # Before anything is printed or connected: a SIGTERM while the worker starts (a deploy, a test
    # that read its banner) ends it cleanly, exit code 0, not by the signal's default action.
    stop = stopped_by_signals()
    quiet_expected_failures()
    settings = Settings.from_env()
    try:
        extra = load_tool_modules()
    except ToolModulesError as error:
        raise SystemExit(f"worker: {error}") from None
    try:
        backend = backend_from_env(settings)
        if isinstance(backend, ScriptedModel):
            backend.check_tools_offered(CATALOG.names())
    except ScriptError as error:  # HITL_MODEL=scripted:PATH with a script that cannot be played
        raise SystemExit(f"worker: {error}") from None
    tuning = WorkerTuning.from_env()
    try:
        mcp = toolbox_from_env()  # a malformed HITL_MCP_CONFIG stops the worker here, with the reason
        policy = policy_from_env()  # so does a malformed HITL_POLICY
        agents = agents_from_env()  # and HITL_AGENTS
        channels = channels_from_env()  # and HITL_CHANNELS, or a secret it lacks
        webhooks = signed_webhooks(channels, os.environ)
        message_channels = channel_doors(channels, os.environ)
        check_settings()
    except (McpConfigError, PolicyError, AgentsError, ChannelsError, KeyConfigError, MissingExtra,
            ShortcutSettingError) as error:
        raise SystemExit(f"worker: {error}") from None
    print(f"worker: operator policy: {describe_policy(policy)}")
    if warning := model_warning():  # before connecting: a worker that cannot connect yet says it too
        print(f"worker: {warning}", file=sys.stderr, flush=True)
    if channels.slack and channels.slack.channel and not channels.slack.shared_channel:
        print(f"worker: warning: slack.channel {channels.slack.channel} is shown no card: its members may not all see "
              "every session (say \"channel_may_see_every_session\": true if they may); each pause goes to each "
              "person who may decide it, directly", file=sys.stderr)
    if agents:
        print(f"worker: agents (HITL_AGENTS): {', '.join(sorted(agents))}")
    try:
        for line in telemetry.start("hitl-worker", "HITL_METRICS_PORT"):  # before the first client connects
            print(f"worker: {line}")
    except telemetry.TelemetryError as error:
        raise SystemExit(f"worker: {error}") from None
    client = await until_stopped(connect_with_patience(settings, tuning.connect_patience_seconds), stop)
    if client is None:
        print("worker: shutting down", file=sys.stderr)
        return
    async with mcp:
        await serve(client, settings, backend, tuning, extra, mcp, stop, webhooks, message_channels)


def channel_doors(channels: Channels, environ: Mapping[str, str]) -> list[MessageChannel]:
    """The message channels HITL_CHANNELS configures; each one's library (a pip extra) is imported
    only when its part of the file is there, and a part whose extra is missing stops the worker."""
    doors: list[MessageChannel] = []
    if channels.slack is not None:
        require("slack", "HITL_CHANNELS slack")
        from activities.slack import slack_messages
        doors += slack_messages(channels, environ)
    if channels.email is not None:
        require("mail", "HITL_CHANNELS email")
        from activities.mail import mail_messages
        doors += mail_messages(channels, environ, worker_email_link_key)  # or the key of its links stops it
    return doors


def stopped_by_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def until_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """`work`'s result, or None (and `work` cancelled) when `stop` is set first: a worker that
    cannot reach its server yet still stops when asked."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def serve(client: Client, settings: Settings, backend: ModelBackend, tuning: WorkerTuning,
                extra: list[str], mcp: McpToolbox, stop: asyncio.Event, webhooks: list[SignedWebhook],
                message_channels: list[MessageChannel]) -> None:
    settings.workspace.mkdir(parents=True, exist_ok=True)
    workspace = await refuse_another_workspace(client, settings.task_queue, settings.workspace)
    tuning = replace(tuning, identity=with_workspace(tuning.identity or client.identity, workspace))
    worker = build_worker(client, settings.task_queue, backend, settings.workspace, settings.notify_url, tuning=tuning,
                          webhooks=webhooks, message_channels=message_channels)
    print(f"worker: {settings.address} namespace={settings.namespace} task_queue={settings.task_queue} "
          f"({settings.secured})")
    print(f"worker: identity {tuning.identity}; {tuning.describe()}")
    print(f"worker: model: {backend.description}")
    print(f"worker: workspace: {settings.workspace.resolve()}" + (f"; extra tools from {extra}" if extra else ""))
    print(f"worker: notifications: {settings.notify_url or settings.workspace / 'notifications.jsonl'}"
          + "".join(f", signed to {shown_url(hook.url)}" for hook in webhooks)
          + "".join(f", {channel.name} messages" for channel in message_channels))
    for line in mcp.describe():
        print(f"worker: MCP server {line}")
    for line in mcp.warning_lines():
        print(f"worker: warning: {line}")
    beating = heartbeat.heartbeat_file()
    async with worker:
        # A fatal worker error cancels this task (the SDK's `async with`), so the beat stops with it.
        beats = asyncio.ensure_future(heartbeat.beat(
            beating, lambda: not worker.is_shutdown,
            f"pid {os.getpid()}, identity {tuning.identity}, task queue {settings.task_queue}")) if beating else None
        try:
            await stop.wait()
            print("worker: shutting down", file=sys.stderr)
        finally:
            if beats:
                beats.cancel()  # from the first moment of the shutdown, --check says it is not polling


def command_line(argv: list[str] | None = None) -> None:
    """`python worker.py` (or the installed `hitl-worker`): poll until SIGINT/SIGTERM."""
    parser = OneLineParser(
        prog=os.path.basename(sys.argv[0]) or "worker.py",
        description="Run the agent workflow and its activities on HITL_TASK_QUEUE until SIGINT/SIGTERM "
                    "(settings: docs/interface.md, 'Environment variables').")
    parser.add_argument("--check", action="store_true",
                        help="exit 0 when the worker beating into HITL_WORKER_HEARTBEAT polls (a container's health check)")
    if parser.parse_args(sys.argv[1:] if argv is None else argv).check:
        exit_with(health_check)
    exit_with(lambda: asyncio.run(main()))
