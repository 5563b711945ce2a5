"""Who decided: on a session with `verified_decisions`, the person a proof names.

A decision's `by` is whatever its sender typed, unless the session was started
with verified decisions (the API does so by default). Then each approve,
reject, answer, claim and release must carry a proof (workflows/proofs.py)
that binds it to this session, this call, this verb and these arguments; the
proof's person becomes `by`, and each proof counts once. Messages need one
too: four-eyes compares who asked with who approves.

The trusted public keys reach the workflow through a local activity's recorded
result, so a replay checks the same proofs against the same keys.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from pydantic import BaseModel, Field

from workflows.decisions import Approve, DecisionBase, Refusal

from workflows.pauses import PendingCall
from workflows.proofs import FRESH_FOR, MESSAGE_CALL_ID, DecisionClaims, ProofError, sign_decision, verify_decision
from workflows.rules import args_sha256
from workflows.session import UserMessage

SPENT_KEPT = 2_000  # proofs a session accepts per freshness window; more wait rather than push old ones out

Checked = TypeVar("Checked", bound=DecisionBase)


class ProofRefusal(Refusal):
    """A decision without a valid proof on a verified session: refused, and always audited."""

    code = "conflict"


class SpentProof(BaseModel):
    nonce: str
    issued_at: int


@dataclass(frozen=True)
class RunCheck:
    """The run a proof must have been made for, and how the workflow recorded earlier refusals.

    A proof names the run it was made for: a `temporal workflow reset` (or a session closed and
    started again under its id) is a new run, and the proofs read from the old one's history are
    no decision in it; after a reset, pending calls wait for a new decision. A reset run replays,
    under its new id, what the old run accepted; `refused_before(nonce)` says whether this very
    refusal was recorded when it first happened (AgentWorkflow.run_check), so a replay accepts
    and refuses exactly as the run did.

    `chain`, on runs since proofs name it (workflows/patches.py), is the session's chain of runs
    (its first run's id, kept by a hand-over and by a reset alike): a proof must name it, so a
    decision issued in another chain under the same id (a mail link, a Slack button the API was
    asked to sign for) is none here. None: not checked."""

    run_id: str
    refused_before: Callable[[str], bool]
    chain: str | None = None


class Verifier(BaseModel):
    """The session's trusted keys and the proofs it has already accepted (both carried over)."""

    required: bool = False
    trusted_keys: dict[str, str] = Field(default_factory=dict)
    spent: list[SpentProof] = Field(default_factory=list)
    # Proofs bind the whole decision (off for runs recorded before they did).
    bound: bool = False

    def check(self, decision: Checked, session_id: str, items: Sequence[PendingCall], now: datetime,
              run: RunCheck | None = None) -> tuple[Checked, SpentProof | None]:
        """The decision as the proof says it was made (its person as `by`), or a ProofRefusal."""
        if not self.required:
            return decision, None
        claims = self.signed_claims(decision.proof, "verified decisions (made through the API)", now)
        if claims.session_id != session_id:
            raise ProofRefusal("the proof was made for another session")
        if claims.action != decision.verb:
            raise ProofRefusal(f"the proof was made to {claims.action}, not to {decision.verb}")
        if decision.call_id not in (None, claims.call_id):
            raise ProofRefusal(f"the proof was made for call {claims.call_id}, not {decision.call_id}")
        item = next((item for item in items if item.call_id == claims.call_id), None)
        if item is not None:
            edited = decision.args if isinstance(decision, Approve) else None
            expected = args_sha256(edited) if edited is not None else item.args_sha256
            if claims.args_sha256 != expected:
                raise ProofRefusal("the proof was made for other arguments than these")
        self.refuse_unbound(claims, decision.digest(), run)
        self.refuse_if_spent(claims.nonce, now)
        proven = decision.model_copy(update={"by": claims.by, "call_id": claims.call_id})
        return proven, SpentProof(nonce=claims.nonce, issued_at=claims.issued_at)

    def groups_vouched(self, decision: DecisionBase, now: datetime) -> tuple[str, ...]:
        """The groups the proof of a decision `check` accepted says its person is in (none on an
        unverified session: nothing vouches for anyone there)."""
        if not self.required or decision.proof is None:
            return ()
        return tuple(self.signed_claims(decision.proof, "verified decisions (made through the API)", now).groups or ())

    def stood_in_for(self, decision: DecisionBase, now: datetime) -> str | None:
        """The person the proof of a decision `check` accepted says its person decides for, as
        their stand-in (workflows/stand_ins.py); None for one's own decision, and on an unverified
        session, where nothing vouches for a hand-over."""
        if not self.required or decision.proof is None:
            return None
        return self.signed_claims(decision.proof, "verified decisions (made through the API)", now).for_

    def check_message(self, message: UserMessage, session_id: str, now: datetime,
                      run: RunCheck | None = None) -> tuple[UserMessage, SpentProof | None]:
        """A message's author counts (four-eyes compares it with the approver), so on a verified
        session a message, too, must come with a proof of who wrote this very text."""
        if not self.required:
            return message, None
        claims = self.signed_claims(message.proof, "verified messages (sent through the API)", now)
        if claims.session_id != session_id or claims.action != "message" or claims.call_id != MESSAGE_CALL_ID:
            raise ProofRefusal("the proof was not made for a message to this session")
        if claims.args_sha256 != args_sha256({"text": message.text}):
            raise ProofRefusal("the proof was made for another text")
        self.refuse_unbound(claims, message_digest(message), run)
        self.refuse_if_spent(claims.nonce, now)
        return message.model_copy(update={"by": claims.by}), SpentProof(nonce=claims.nonce, issued_at=claims.issued_at)

    def proves_start(self, session_input: Any, session_id: str, now: datetime) -> bool:
        """Whether the start input carries the API's proof that its `by` started it so: on a verified
        session started any other way (the `temporal` CLI), the first request is only asserted."""
        if not self.required or session_input.proof is None or session_input.by is None:
            return False
        try:
            claims = self.signed_claims(session_input.proof, "a start signed by the API", now)
        except ProofRefusal:
            return False
        return (claims.session_id == session_id and claims.action == "message" and claims.call_id == START_CALL_ID
                and claims.by == session_input.by and claims.args_sha256 == args_sha256({"text": session_input.message})
                and claims.decision_sha256 == start_digest(session_input.model_dump(mode="json")))

    def refuse_unbound(self, claims: DecisionClaims, digest: str, run: RunCheck | None) -> None:
        """A proof counts for the decision exactly as it was signed, in the run it was made for."""
        if not self.bound:
            return
        if claims.decision_sha256 is None or claims.run_id is None:
            raise ProofRefusal("the proof does not bind the run and the whole decision; ask the API for a new one")
        if claims.decision_sha256 != digest:
            raise ProofRefusal("the proof was made for another decision: its comment, remember, result, reason, "
                               "answer or arguments differ")
        self.refuse_other_chain(claims, run)
        if run is not None and claims.run_id != run.run_id and run.refused_before(claims.nonce):
            raise ProofRefusal("the proof was made for another run of this session (it was reset, started "
                               "again or handed over since); decide again", code="stale_run")

    @staticmethod
    def refuse_other_chain(claims: DecisionClaims, run: RunCheck | None) -> None:
        """On runs that check it, a proof counts only in the session's chain of runs it names."""
        if run is None or run.chain is None or claims.chain == run.chain:
            return
        if claims.chain is None:
            raise ProofRefusal("the proof does not name the session's chain of runs; ask the API for a new one")
        raise ProofRefusal("the proof was made for another session under this id (another chain of runs): "
                           "it decides nothing in this one")

    def signed_claims(self, proof: str | None, what: str, now: datetime) -> DecisionClaims:
        """What a proof vouches for, if a trusted key signed it and it is fresh."""
        if proof is None:
            raise ProofRefusal(f"this session accepts only {what}: this one carries no proof")
        try:
            return verify_decision(proof, self.trusted_keys, now)
        except ProofError as error:
            raise ProofRefusal(str(error)) from None

    def refuse_if_spent(self, nonce: str, now: datetime) -> None:
        """Each proof counts once. The session remembers every proof that could still pass as
        fresh; when that memory is full it refuses new ones for a while rather than forget one."""
        if any(spent.nonce == nonce for spent in self.spent):
            raise ProofRefusal("this proof was already used")
        horizon = _horizon(now)
        if sum(spent.issued_at >= horizon for spent in self.spent) >= SPENT_KEPT:
            raise ProofRefusal(f"more than {SPENT_KEPT} verified decisions in {FRESH_FOR * 2}; try again in a few minutes")

    def spend(self, proof: SpentProof | None, now: datetime) -> None:
        """Remember a used proof for as long as it could still pass as fresh."""
        if proof is None:
            return
        horizon = _horizon(now)
        self.spent = [spent for spent in self.spent if spent.issued_at >= horizon] + [proof]


def _horizon(now: datetime) -> float:
    """Proofs issued before this cannot pass as fresh any more (clocks may drift either way)."""
    return (now - 2 * FRESH_FOR - timedelta(minutes=1)).timestamp()


START_CALL_ID = "start"  # a start's proof is about no call: it binds the whole start input


def start_digest(session_input: dict[str, Any]) -> str:
    """What a start's proof binds: the whole input as the workflow reads it (rules and all)."""
    from workflows.session import SessionInput

    checked = SessionInput.model_validate({**session_input, "proof": None, "carried": None})
    return args_sha256({"verb": "start", **checked.model_dump(mode="json", exclude={"proof", "carried"})})


def start_proof(key: Any, key_id: str, session_id: str, session_input: dict[str, Any], now: datetime | None = None) -> str:
    """The API's proof that `by` started this session with this input."""
    return sign_decision(key, key_id, session_id=session_id, call_id=START_CALL_ID, action="message",
                         by=session_input.get("by") or "", args_sha256=args_sha256({"text": session_input.get("message")}),
                         now=now, decision_sha256=start_digest(session_input))


def message_digest(message: UserMessage) -> str:
    """What a message's proof binds besides its text's hash: everything the message does."""
    return args_sha256({"verb": "message", **message.model_dump(mode="json", exclude={"proof", "by"})})
