"""Properties of verified decisions, for any decision a caller could send (no server needed).

A proof binds everything its decision does, once: the same decision with any field changed,
added or removed is refused; so is a proof made for another run of the session (a reset, a session
started again under its id), one made in another chain of runs under the same id, and one that was
already spent.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.identity import ProofRefusal, RunCheck, Verifier
from workflows.decisions import parse_decision
from workflows.pauses import PendingCall
from workflows.proofs import public_key_b64, sign_decision
from workflows.rules import args_sha256

KEY = Ed25519PrivateKey.generate()
NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
ITEM = PendingCall(call_id="c1", kind="approval", tool="delete_file", args={"path": "a"},
                   args_sha256=args_sha256({"path": "a"}), requested_at=NOW)

texts = st.text(max_size=20)
remember = st.fixed_dictionaries({"scope": st.sampled_from(["tool", "same_args"]),
                                  "for_seconds": st.integers(1, 10**7)})
FIELDS: dict[str, dict[str, Any]] = {
    "approve": {"comment": texts, "remember": remember, "args": st.fixed_dictionaries({"path": texts}),
                "expected_args_sha256": st.just(ITEM.args_sha256)},
    "reject": {"reason": texts},
    "answer": {"answer": st.one_of(texts, st.integers(), st.booleans())},
    "claim": {"for_seconds": st.integers(1, 3600)},
    "release": {},
}


REQUIRED = {"answer"}


@st.composite
def decisions(draw: Any) -> tuple[str, dict[str, Any]]:
    verb = draw(st.sampled_from(sorted(FIELDS)))
    fields = {name: draw(value) for name, value in FIELDS[verb].items() if name in REQUIRED or draw(st.booleans())}
    return verb, fields


RUN = "run-1"
LIVE = RunCheck(run_id=RUN, refused_before=lambda nonce: True)  # live, a proof for another run is refused


def signed(verb: str, fields: dict[str, Any], issued: datetime = NOW, run_id: str = RUN,
           chain: str | None = None) -> dict[str, Any]:
    decision = parse_decision(verb, {**fields, "call_id": "c1"})
    sha = args_sha256(fields["args"]) if verb == "approve" and "args" in fields else ITEM.args_sha256
    proof = sign_decision(KEY, "k", session_id="s", call_id="c1", action=verb, by="ana", args_sha256=sha,  # type: ignore[arg-type]
                          now=issued, decision_sha256=decision.digest(), run_id=run_id, chain=chain)
    return {**fields, "call_id": "c1", "proof": proof}


def verifier() -> Verifier:
    return Verifier(required=True, bound=True, trusted_keys={"k": public_key_b64(KEY)})


def check(verifier_: Verifier, verb: str, payload: dict[str, Any], run: RunCheck = LIVE) -> Any:
    return verifier_.check(parse_decision(verb, payload), "s", [ITEM], NOW, run)


@settings(max_examples=300, deadline=None)
@given(decisions())
def test_a_proof_counts_for_its_decision_once(decision: tuple[str, dict[str, Any]]) -> None:
    verb, fields = decision
    payload, checking = signed(verb, fields), verifier()
    proven, spent = check(checking, verb, {**payload, "by": "mallory"})
    assert proven.by == "ana"
    checking.spend(spent, NOW)
    with pytest.raises(ProofRefusal, match="already used"):
        check(checking, verb, payload)


@settings(max_examples=300, deadline=None)
@given(decisions(), decisions())
def test_a_proof_does_not_cover_any_other_decision(signed_for: tuple[str, dict[str, Any]],
                                                  sent: tuple[str, dict[str, Any]]) -> None:
    (verb, fields), (_, other_fields) = signed_for, sent
    other = {name: value for name, value in other_fields.items() if name in FIELDS[verb]}
    if verb == "answer":
        other.setdefault("answer", "")
    if parse_decision(verb, other).digest() == parse_decision(verb, fields).digest():
        return  # the same decision, written another way
    with pytest.raises(ProofRefusal, match="another decision|other arguments"):
        check(verifier(), verb, {**other, "call_id": "c1", "proof": signed(verb, fields)["proof"]})


@settings(max_examples=100, deadline=None)
@given(decisions(), st.text(min_size=1, max_size=12))
def test_no_proof_counts_in_another_run_but_a_replay_accepts_what_the_run_accepted(
        decision: tuple[str, dict[str, Any]], other_run: str) -> None:
    verb, fields = decision
    payload = signed(verb, fields, run_id=f"old-{other_run}")
    with pytest.raises(ProofRefusal, match="another run"):
        check(verifier(), verb, payload)
    # A reset run replays, under its new id, what the old run accepted: no refusal was recorded.
    replaying = RunCheck(run_id=RUN, refused_before=lambda nonce: False)
    proven, _ = check(verifier(), verb, payload, replaying)
    assert proven.by == "ana"


CHAIN = "chain-1"
CHAINED = RunCheck(run_id=RUN, refused_before=lambda nonce: True, chain=CHAIN)  # a run that checks its chain


@settings(max_examples=100, deadline=None)
@given(decisions(), st.one_of(st.none(), st.text(max_size=12)))
def test_no_proof_counts_in_another_chain_of_runs_where_the_run_checks_it(
        decision: tuple[str, dict[str, Any]], other_chain: str | None) -> None:
    """A session closed and started again under its id is another chain: a proof naming any other
    chain, or none, is refused there; a run from before proofs named their chain does not ask."""
    verb, fields = decision
    payload = signed(verb, fields, chain=None if other_chain == CHAIN else other_chain)
    with pytest.raises(ProofRefusal, match="another session under this id|does not name the session's chain"):
        check(verifier(), verb, payload, CHAINED)
    assert check(verifier(), verb, payload)[0].by == "ana"
    assert check(verifier(), verb, signed(verb, fields, chain=CHAIN), CHAINED)[0].by == "ana"
