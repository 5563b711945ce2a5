"""hitl.testing: test your own tools, policy and agents with a scripted model and a real Temporal.

    async with Harness(tool_modules=["my_tools"], script=[...], workspace=tmp_path) as h:
        session = await h.client.start("refund order A-17")

`Harness` starts the embedded Temporal dev server (the `temporal` CLI's, with the product's flags:
hitl/devserver.py) unless it is given a client, and runs a worker in this process on a task queue
of its own: the product's worker (hitl/worker.py's build_worker, with HitlPlugin), your tool
modules imported, the scripted model playing `script` (activities/scripted_model.py) to every
session. `harness.client` is a HitlClient on that task queue. No model server, no Docker.

`policy`, `agents` and `env` are the worker's environment (HITL_POLICY, HITL_AGENTS, anything
else): set in this process while the harness runs and put back afterwards, as the worker reads
them when it judges a call. A policy or agents given as a dict is written to a file of the
harness's own; a path is used as it is.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Mapping, Sequence

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.scripted_model import ScriptedModel, load_script, parse_script
from hitl.client.python_client import HitlClient
from hitl.devserver import SERVER_FLAGS, temporal_binary
from hitl.settings import DATA_CONVERTER
from hitl.worker import build_worker
from workflows.agents import agents_from_env
from workflows.policy import policy_from_env

DEV_SERVER_FLAGS = SERVER_FLAGS


async def embedded_server() -> WorkflowEnvironment:
    """The dev server as the product starts it (its search attributes, its Update limit), on a free port."""
    return await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER, dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=DEV_SERVER_FLAGS,
    )


def scripted_model(script: Sequence[Mapping[str, Any]] | str | Path) -> ScriptedModel:
    """A list of replies as given, or the JSON file a path names (a malformed one raises ScriptError)."""
    if isinstance(script, (str, Path)):
        return ScriptedModel(load_script(Path(script)), str(script))
    return ScriptedModel(parse_script(list(script)))


class Harness:
    """An async context manager: a worker with your tools and a script, and `client` to drive it."""

    def __init__(self, tool_modules: Sequence[str] = (), script: Sequence[Mapping[str, Any]] | str | Path = (),
                 workspace: str | Path | None = None, policy: Mapping[str, Any] | str | Path | None = None,
                 agents: Mapping[str, Any] | str | Path | None = None, env: Mapping[str, str] | None = None,
                 client: Client | HitlClient | None = None) -> None:
        self.model = scripted_model(script)  # a bad script says so here, before anything starts
        self.tool_modules = list(tool_modules)
        self.workspace = Path(workspace) if workspace is not None else None
        self.policy, self.agents, self.env = policy, agents, dict(env or {})
        self.given = client.temporal if isinstance(client, HitlClient) else client
        self.task_queue = f"hitl-harness-{uuid.uuid4().hex[:8]}"
        self.stack = AsyncExitStack()
        self.saved_env: dict[str, str | None] = {}
        self.server: WorkflowEnvironment | None = None
        self._client: HitlClient | None = None

    @property
    def client(self) -> HitlClient:
        if self._client is None:
            raise RuntimeError("the harness is not running: use it as `async with Harness(...) as harness`")
        return self._client

    async def __aenter__(self) -> Harness:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        files = Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="hitl-harness-")))
        self.set_env({**self.env, **self.file_setting("HITL_POLICY", self.policy, files),
                      **self.file_setting("HITL_AGENTS", self.agents, files)})
        policy_from_env()  # a malformed policy or agents file: its reason, now
        agents_from_env()
        for name in self.tool_modules:
            importlib.import_module(name)  # a module's @tool functions register as it is imported
        workspace = self.workspace or files / "workspace"
        if self.given is None:
            self.server = await embedded_server()
        temporal = self.given or self.server.client  # type: ignore[union-attr]  # one of the two is set
        await self.stack.enter_async_context(build_worker(temporal, self.task_queue, self.model, workspace))
        self._client = HitlClient(temporal, self.task_queue)

    async def stop(self) -> None:
        try:
            await self.stack.aclose()
        finally:
            if self.server is not None:
                await self.server.shutdown()
                self.server = None
            self.restore_env()

    @staticmethod
    def file_setting(name: str, value: Mapping[str, Any] | str | Path | None, folder: Path) -> dict[str, str]:
        if value is None:
            return {}
        if isinstance(value, (str, Path)):
            return {name: str(value)}
        path = folder / f"{name.lower()}.json"
        path.write_text(json.dumps(value))
        return {name: str(path)}

    def set_env(self, variables: Mapping[str, str]) -> None:
        for name, value in variables.items():
            self.saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    def restore_env(self) -> None:
        for name, value in self.saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved_env.clear()


__all__ = ["Harness"]
