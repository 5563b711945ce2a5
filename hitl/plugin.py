"""HitlPlugin: how a worker of this product runs sessions, said once with the SDK's plugin API.

The worker (hitl/worker.py's build_worker), the replayer that checks recorded histories
(tests/support/replaying.py), the tests and the benches all take this plugin, so none can
drift from another: the workflow, the sandbox with its passthrough modules (or the runner of
hitl/sandbox_runner.py), the interceptors, the payload limit, the product's data converter
for a replay, and the activities when a worker has them (they need its client, model and
workspace: build_worker makes them).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, UnsandboxedWorkflowRunner, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.storable_outcomes import StorableOutcomes
from hitl.sandbox_runner import ContextFreeSandbox, fits_this_sdk, ignores_context
from hitl.sdk_shortcuts import CONTEXT_FREE_SANDBOX, enabled
from hitl.settings import DATA_CONVERTER
from workflows.agent import AgentWorkflow
from workflows.stand_in_book import StandInBook
from workflows.arity import OneArgument
from workflows.metrics import SessionMetrics

# The sandbox re-imports every module a workflow uses, once per workflow run.
# pydantic and our pure modules are deterministic: sharing them saves most of a
# megabyte and the model-building time per cached session.
PURE_MODULES = (
    "workflows.conversation", "workflows.forms", "workflows.pauses", "workflows.planning",
    "workflows.requests", "workflows.rules", "workflows.session", "workflows.limits", "workflows.handover",
    "workflows.events", "workflows.metrics", "workflows.identity", "workflows.proofs", "workflows.visibility",
    "workflows.policy", "workflows.patches", "workflows.decisions", "workflows.transcript_index",
    "workflows.contract", "workflows.deciders", "workflows.arity", "workflows.agents", "hitl.catalog",
    "workflows.stand_ins",
)
# The workflow's own code: workflows/agent.py and the parts it is made of. Shared too: importing
# these modules again for every session was a tenth of a busy worker's time, and running the
# `@workflow.defn` of the workflow class (which inspects each of its members) another
# twentieth (docs/evidence.md). What the sandbox would have caught in them (a clock, randomness,
# I/O) tests/unit/test_sandbox_passthrough.py refuses instead; the builtins the sandbox
# restricts (open, input, ...) stay restricted while any workflow code runs.
WORKFLOW_MODULES = (
    "workflows.agent", "workflows.handlers", "workflows.inbound", "workflows.views", "workflows.waiting",
    "workflows.judging", "workflows.starting", "workflows.continuing", "workflows.closing", "workflows.recorder",
    "workflows.activity_calls", "workflows.delegating", "workflows.tool_input", "workflows.session_run",
    "workflows.notices", "workflows.child_reports", "workflows.payloads", "workflows.server_questions",
    "workflows.stand_in_book",
)
SANDBOX = SandboxRestrictions.default.with_passthrough_modules(
    "pydantic", "pydantic_core", "annotated_types", "typing_inspection", "cryptography", "jsonschema",
    *PURE_MODULES, *WORKFLOW_MODULES,
)


def workflow_runner(converter: DataConverter, sandbox: bool = True) -> WorkflowRunner:
    """The sandbox, entered once per activation where `converter` reads no context
    (hitl/sandbox_runner.py), or no sandbox when the operator turned it off."""
    if not sandbox:
        return UnsandboxedWorkflowRunner()
    if ignores_context(converter) and fits_this_sdk() and enabled(CONTEXT_FREE_SANDBOX):
        return ContextFreeSandbox(restrictions=SANDBOX)
    return SandboxedWorkflowRunner(restrictions=SANDBOX)


def the_products_unless_chosen(chosen: DataConverter | None) -> DataConverter:
    """A replay reads histories with the product's converter, unless its caller chose another
    (an encrypted namespace's key, say). A worker's is its client's, which the plugin leaves alone."""
    return chosen if chosen is not None and chosen is not DataConverter.default else DATA_CONVERTER


class HitlPlugin(SimplePlugin):
    """AgentWorkflow as every worker and replayer of this product runs it.

    `activities`: a worker's (hitl/worker.py, session_activities); a replayer has none.
    `sandbox`: False runs the workflow unsandboxed (HITL_WORKFLOW_SANDBOX=off). `runner`: a
    runner to use instead of the one the converter calls for (a test's that logs, say)."""

    def __init__(self, activities: Sequence[Callable[..., Any]] | None = None, *, sandbox: bool = True,
                 runner: WorkflowRunner | None = None) -> None:
        super().__init__(
            "hitl.HitlPlugin",
            data_converter=the_products_unless_chosen,
            # A signal or Update sent with no or several arguments; the Updates' validators refuse,
            # counted (workflows/arity.py). Per-session metrics (workflows/metrics.py). An activity's
            # result that history cannot store: a final failure, never a retry for ever.
            interceptors=[OneArgument(), SessionMetrics(), StorableOutcomes()],
            activities=activities,
            workflows=[AgentWorkflow, StandInBook],
        )
        self.sandbox = sandbox
        self.runner = runner

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        config["workflow_runner"] = self.runner or workflow_runner(config["client"].data_converter, self.sandbox)
        # A rejected Update is answered with the request it rejects; the worker's own size check
        # would turn a caller's oversized Update into a task that fails for ever. The server
        # still refuses anything it would store over its limits.
        config["disable_payload_error_limit"] = True
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config = super().configure_replayer(config)
        config["workflow_runner"] = self.runner or workflow_runner(config.get("data_converter", DATA_CONVERTER), self.sandbox)
        return config
