"""A run's start: its input read or refused, and what it learns from the worker before the first turn.

A start input that is wrong in any way fails the session at once with the
reason (never a workflow task that fails on every retry); what the worker
knows (search attributes, decision keys, the operator's policy, the catalog's
tool names) is learnt through local activities, so a replay sees the same.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from workflows.contract import SESSION_FACTS, UNKNOWN_TOOLS
from workflows.forms import describe_validation_error
from workflows.handover import RunState
from workflows.payloads import decoded
from workflows.limits import RECORDED_BYTES, clip
from workflows.decisions import Refusal
from workflows.requests import FactsRequest, SessionFacts
from workflows.session import SessionInput
from workflows.activity_calls import LocalChecks
from workflows.delegating import Delegating
from workflows.recorder import Recorder
from workflows.session_run import SessionRun

RULE_FIELDS = {"approvers", "required_approvals", "auto_approve", "require_approval"}


def read_input(request: RawValue | None) -> tuple[SessionInput, RunState | None, str | None]:
    """The start input, and the setup error that fails the session at once with the reason (or None)."""
    try:
        config = SessionInput.model_validate(decoded(request))
        problems = config.rule_problems()
        if problems:
            raise Refusal("; ".join(problems))
        if config.carried is None:
            return config, None, None
        info = workflow.info()
        # Temporal sets continued_run_id on a cron schedule's runs and on retries as well, each
        # with the start input as its caller wrote it: neither is the session handing over.
        if info.continued_run_id is None or info.cron_schedule or info.attempt > 1:
            raise Refusal("carried: only a session's own previous run may set it (continue-as-new), "
                          "not a cron schedule's run or a retry")
        return config, RunState.model_validate(config.carried), None
    except ValidationError as error:
        problem = f"invalid session input: {describe_validation_error(error)}"
    except Refusal as refusal:
        problem = f"invalid session input: {refusal}"
    except Exception as error:  # e.g. JSON nested past any parser's limit
        problem = f"invalid session input: {clip(str(error), RECORDED_BYTES)}"
    return SessionInput(message="(invalid input)"), None, problem


class Starting:
    """A part of AgentWorkflow: what its run learns from the worker before the first turn."""

    def __init__(self, session: SessionRun, checks: LocalChecks, recorder: Recorder, delegating: Delegating) -> None:
        self.session = session
        self.checks = checks
        self.recorder = recorder
        self.delegating = delegating

    async def check_start(self) -> None:
        """The rules' tool names checked (a session's first run) and the worker's facts learnt.
        Each round of local activities is a wait inside the start's workflow task, which a query
        arriving with the task cuts short, so runs of the current build ask in one round, and ask
        the catalog only when the rules name a tool (otherwise nothing could be unknown)."""
        first_run = workflow.info().continued_run_id is None
        if not self.session.behaviours.starts_in_one_round:
            if first_run:
                self.refuse_unknown_tools(await self.ask_unknown_tools())
            self.learn_environment(await self.ask_facts())
            return
        if first_run and self.session.config.name_a_tool():
            problems, facts = await asyncio.gather(self.ask_unknown_tools(), self.ask_facts())
            self.refuse_unknown_tools(problems)
        else:
            facts = await self.ask_facts()
        self.learn_environment(facts)

    async def ask_facts(self) -> SessionFacts:
        """Which search attributes to publish, which keys sign decisions, the operator's agents and
        what the operator's policy says of the rules, as this run's worker knows them (recorded, so
        a replay sees the same)."""
        proves_carried = self.session.config.carried is not None
        facts: SessionFacts = await self.checks.local_activity(
            SESSION_FACTS.name, FactsRequest(
                verified_decisions=self.session.config.verified_decisions,
                rules=self.session.config.model_dump(include={*RULE_FIELDS, "verified_decisions", "escalate_to", "by"}),
                continued_from=workflow.info().continued_run_id if proves_carried else None,
            ),
            result_type=SessionFacts, start_to_close_timeout=timedelta(seconds=10),
            summary="search attributes, decision keys and the operator's policy",
        )
        return facts

    def learn_environment(self, facts: SessionFacts) -> None:
        """The run takes what the worker said. A verified session that no key could ever satisfy
        is refused at once rather than left waiting for ever."""
        proves_carried = self.session.config.carried is not None
        if proves_carried and not facts.carried_proven:
            # Nothing of the carried state may count: not its grants, its verifier, its inbox.
            raise ApplicationError(f"invalid session input: carried: {facts.carried_problem or 'not proven'}",
                                   type="InvalidSessionInput", non_retryable=True)
        if facts.policy_problems:
            raise ApplicationError(f"invalid session input: {'; '.join(facts.policy_problems)}",
                                   type="InvalidSessionInput", non_retryable=True)
        if self.session.behaviours.delegates_to_agents:
            self.delegating.learn_agents(facts.agents)
        if facts.trusted_keys:
            self.session.run_state.verifier.trusted_keys = facts.trusted_keys
        if workflow.info().continued_run_id is None:
            if self.session.run_state.first_message_asserted is not None:
                self.session.run_state.first_message_asserted = not self.session.run_state.verifier.proves_start(
                    self.session.config, workflow.info().workflow_id, workflow.now())
        if self.session.run_state.verifier.required and not self.session.run_state.verifier.trusted_keys:
            raise ApplicationError(
                "invalid session input: verified_decisions needs a worker that trusts the API's signing key "
                "(HITL_TRUSTED_KEYS, or the key file the API creates; see docs/interface.md, 'The HTTP API and the web inbox')",
                type="InvalidSessionInput", non_retryable=True,
            )
        self.session.publisher.start(facts.registered_search_attributes)
        self.recorder.publish()
        self.recorder.publish_who()

    async def ask_unknown_tools(self) -> list[str]:
        """What the rules name that the worker's catalog lacks, judged as the session starts; a
        local activity records the verdict, so a later catalog cannot change it."""
        named = self.session.config.model_dump(include=RULE_FIELDS)
        if self.session.config.agents:
            named["agents"] = sorted(self.session.config.agents)
        problems: list[str] = await self.checks.local_activity(
            UNKNOWN_TOOLS.name, named, result_type=UNKNOWN_TOOLS.result,
            start_to_close_timeout=timedelta(seconds=10), summary="check the rules' tool names",
        )
        return problems

    @staticmethod
    def refuse_unknown_tools(problems: list[str]) -> None:
        """Rules that name an unknown tool are refused: a typo would silently weaken them."""
        if problems:
            raise ApplicationError(f"invalid session input: {'; '.join(problems)}", type="InvalidSessionInput", non_retryable=True)
