"""The policy's `groups_from_identity`: the groups an OpenID token vouches for count as the policy's
own in the API (as_seen_by), a call keeps the group names it names (so the session can match a
member it has never heard of), and the session matches them only from a decision's proof."""

from __future__ import annotations

from workflows.deciders import CallRules, proven_members, refusal_to_decide
from workflows.policy import OperatorPolicy

RULES = {"groups": {"finance": ["@payments", "dave"]},
         "tools": {"delete_file": {"approval": "always", "approvers": ["@finance"]}}}


def test_a_call_keeps_the_group_names_only_when_the_policy_takes_groups_from_identity() -> None:
    assert OperatorPolicy.model_validate(RULES).floor_for("delete_file").approvers == ["dave"]  # type: ignore[union-attr]
    taking = OperatorPolicy.model_validate({**RULES, "groups_from_identity": True})
    assert taking.floor_for("delete_file").approvers == ["@finance", "dave"]  # type: ignore[union-attr]


def test_the_token_groups_count_as_the_policys_own_through_nested_groups() -> None:
    taking = OperatorPolicy.model_validate({**RULES, "groups_from_identity": True})
    seen = taking.as_seen_by("ana@example.com", ["payments"])
    assert "ana@example.com" in seen.expand(["@finance"])
    assert seen.groups_of("ana@example.com") == ["finance", "payments"]
    assert taking.groups_of("ana@example.com") == []  # the policy itself is not changed
    ignoring = OperatorPolicy.model_validate(RULES)
    assert ignoring.as_seen_by("ana@example.com", ["payments"]).groups_of("ana@example.com") == []


def test_a_session_may_not_name_a_group_the_policy_does_not_give_the_tool() -> None:
    taking = OperatorPolicy.model_validate({**RULES, "groups_from_identity": True})
    assert taking.loosened_by({"approvers": {"delete_file": ["@finance"]}}) == []
    [problem] = taking.loosened_by({"approvers": {"delete_file": ["@interns"]}})
    assert problem.startswith("approvers: @interns may not decide delete_file")


def test_the_session_matches_a_group_only_for_the_groups_a_proof_vouches_for() -> None:
    call = CallRules(tool="delete_file", approvers=["@finance", "dave"])
    assert refusal_to_decide(call, "ana@example.com", "approve") is not None
    assert refusal_to_decide(call, "ana@example.com", "approve", expand=proven_members("ana@example.com", ["staff"])) is not None
    assert refusal_to_decide(call, "ana@example.com", "approve", expand=proven_members("ana@example.com", ["finance"])) is None
    assert refusal_to_decide(call, "dave", "approve", expand=proven_members("dave", [])) is None
