"""A refusal crosses the wire as a code beside its reason; the API maps the code, never the words."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from hitl.api.gateway import CODE_STATUS, status_of
from hitl.catalog import CATALOG
from hitl.client.refusals import REFUSAL_CODES
from workflows.decisions import Refusal, parse_decision
from workflows.pauses import Pauses, PendingCall
from workflows.rules import args_sha256

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def pauses_with(**fields: Any) -> Pauses:
    item = PendingCall(call_id="c1", kind="approval", tool="delete_file", args={"path": "a"},
                       args_sha256=args_sha256({"path": "a"}), requested_at=NOW, **fields)
    return Pauses(open=[item], decided={"c0": "approved"})


@pytest.mark.parametrize("verb, payload, rules, code", [
    ("approve", {"call_id": "nope"}, {}, "not_found"),
    ("approve", {"call_id": "c0"}, {}, "conflict"),
    ("approve", {"call_id": "c1", "by": "eve"}, {"approvers": ["ana"]}, "forbidden"),
    ("approve", {"call_id": "c1", "by": "bo"}, {"four_eyes": True, "requested_by": "bo"}, "forbidden"),
    ("approve", {"call_id": "c1", "expected_args_sha256": "x"}, {}, "conflict"),
    ("approve", {"call_id": "c1", "result": "no"}, {}, "invalid"),
    ("approve", {"call_id": "c1", "remember": {"scope": "tool", "for_seconds": 9}}, {"remember_allowed": False}, "forbidden"),
    ("answer", {"call_id": "c1", "answer": "yes"}, {}, "invalid"),
    ("approve", {"call_id": "c1", "args": {"path": 3}}, {}, "invalid"),
])
def test_each_refusal_of_the_rule_book_says_what_kind_it_is(verb: str, payload: dict[str, Any], rules: dict[str, Any], code: str) -> None:
    with pytest.raises(Refusal) as refused:
        pauses_with(**rules).decide(parse_decision(verb, payload), CATALOG, NOW)  # type: ignore[arg-type]
    assert refused.value.code == code, str(refused.value)


def test_a_malformed_decision_is_invalid() -> None:
    with pytest.raises(Refusal) as refused:
        parse_decision("approve", {"call_id": 5, "surprise": True})
    assert refused.value.code == "invalid"


def update_failure(reason: str, *details: Any) -> Any:
    return SimpleNamespace(cause=SimpleNamespace(message=reason, details=details), message="update failed")


def test_the_api_maps_the_code_not_the_words() -> None:
    """A reason that reads like another status ('may not decide ... already settled') is mapped by its code."""
    assert status_of(update_failure("ana may not decide it; it is already settled", "conflict")) == 409
    assert status_of(update_failure("unknown call_id 'x' (malformed)", "not_found")) == 404
    assert {code: status_of(update_failure("why", code)) for code in CODE_STATUS} == CODE_STATUS
    assert status_of(update_failure("an old worker says no")) == 409


def test_every_refusal_code_has_a_status() -> None:
    """A code the rule book gains (workflows/pauses.py, RefusalCode) cannot reach the API unmapped."""
    assert set(CODE_STATUS) == REFUSAL_CODES
