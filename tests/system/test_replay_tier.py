"""The every-task-replays tier: scenario files run again on workers that cache no session.

With `HITL_TEST_WORKFLOW_CACHE_SIZE=0` every worker the tests start keeps no session in its
cache (tests/conftest.py), so each workflow task replays the session's whole history, as after
an eviction, a restart or on another worker; and the tests' agents fail on any failed workflow
task (tests/support/sessions.py, running_agent). A session that decides anything from what a
replay sees differently fails here rather than in production after its next eviction.

This runs the chosen files in a pytest of their own, with its own dev server, from the ordinary
suite, so the README's one test command runs the tier too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.inner_pytest import assert_all_passed, start_pytest
from tests.support.sessions import REPLAY_TIER_CACHE

# The scenarios of a person and a session: pauses of every kind, decisions and refusals,
# hand-overs, timeouts, recovery, the real openai client. Not here: files that start the
# product's own processes (tests/system/). test_review_and_rules.py joined once the model
# activity stopped querying the workflow on every step (activities/conversation_cache.py): 3 runs
# in 3 beside two CPU hogs at cache 0.
TIER = [
    "tests/integration/test_review_and_rules.py",
    "tests/integration/test_forged_completions.py",
    "tests/integration/test_seed_flows.py",
    "tests/integration/test_escalation_and_interrupts.py",
    "tests/integration/test_continue_as_new.py",
    "tests/integration/test_memory_and_queue.py",
    "tests/integration/test_timeouts.py",
    "tests/integration/test_bad_input.py",
    "tests/integration/test_sealed_signals.py",
    "tests/integration/test_authorization.py",
    "tests/integration/test_inbox.py",
    "tests/integration/test_user_tools.py",
    "tests/integration/test_openai_path.py",
    "tests/integration/test_model_failures.py",
    "tests/integration/test_recovery.py",
]


@pytest.mark.skipif(bool(REPLAY_TIER_CACHE), reason="already inside the tier")
def test_the_scenario_files_pass_on_workers_that_cache_no_session(tmp_path: Path) -> None:
    assert_all_passed(start_pytest("replay-tier", TIER, tmp_path, HITL_TEST_WORKFLOW_CACHE_SIZE="0"))
