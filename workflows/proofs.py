"""Proof that a decision was made by a person the API verified.

Anyone who reaches the Temporal frontend can send `approve` with `by: "ana"`.
On a session started with `verified_decisions`, a decision counts only when it
carries a proof: an Ed25519 signature, made by the API for the person behind
a bearer token, over the session, the call, the verb, the person and the hash
of the arguments the decision is about, in the run and the chain of runs it was
made for. The workflow checks it with public keys recorded in its history (no
secret ever reaches Temporal), refuses it when it is stale, and accepts each
proof once.

The token is `v1.<key id>.<base64url claims JSON>.<base64url signature>`.
Signing and checking are pure functions, shared by the API and the workflow.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from datetime import datetime, timedelta, timezone
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

VERSION = "v1"
FRESH_FOR = timedelta(minutes=15)  # a proof older (or newer, clocks drift) than this is refused
MAX_PROOF_BYTES = 2_000
ProofAction = Literal["approve", "reject", "answer", "claim", "release", "message"]
MESSAGE_CALL_ID = "-"  # a message is about no call: its proof binds the text instead (args_sha256 of {"text": ...})


class ProofError(Exception):
    """A proof that does not prove what it claims; the decision is refused with this reason."""


class DecisionClaims(BaseModel):
    """What the API vouches for."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    session_id: str
    call_id: str
    action: ProofAction
    by: str
    args_sha256: str
    nonce: str
    issued_at: int  # unix seconds
    # The decision's own digest (DecisionBase.digest: its comment, remember, result, reason,
    # answer...), so no field can be changed or added under the signature. Absent in older proofs.
    decision_sha256: str | None = None
    # The run it was made for: a reset, or a session started again under the same id, is another
    # run, where it is no decision (workflows/identity.py, RunCheck). Absent in older proofs.
    run_id: str | None = None
    # The session's chain of runs it was made in (its first run's id, which a hand-over and a reset
    # keep): a session closed and started again under its id is another chain, where it is no
    # decision, even when a mail link or a Slack button issued in the old one asks the API to sign it.
    # Absent in older proofs.
    chain: str | None = None
    # The groups the API's identity provider vouched for, as the operator's policy reads them (its
    # `groups_from_identity`): a call naming one of them as approvers is the person's to decide.
    # Absent unless the policy takes groups from identity.
    groups: list[str] | None = None
    # The person `by` decides for, as their stand-in (workflows/stand_ins.py): the API signs it only
    # while a hand-over from them to `by` covers the call's tool. Absent for one's own decision.
    for_: str | None = Field(None, alias="for")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key_b64(key: Ed25519PrivateKey) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def sign_decision(
    key: Ed25519PrivateKey, key_id: str, *, session_id: str, call_id: str, action: ProofAction, by: str,
    args_sha256: str, now: datetime | None = None, decision_sha256: str | None = None,
    run_id: str | None = None, chain: str | None = None, groups: list[str] | None = None,
    for_: str | None = None,
) -> str:
    """The `proof` a decision carries, for `by`, about this session, call, verb, arguments and the
    whole decision."""
    claims = DecisionClaims(
        session_id=session_id, call_id=call_id, action=action, by=by, args_sha256=args_sha256,
        nonce=secrets.token_hex(16), issued_at=int((now or datetime.now(timezone.utc)).timestamp()),
        decision_sha256=decision_sha256, run_id=run_id, chain=chain, groups=groups, for_=for_,
    )
    body = _b64(json.dumps(claims.model_dump(exclude_none=True), sort_keys=True, separators=(",", ":")).encode())
    signed = f"{VERSION}.{key_id}.{body}".encode()
    return f"{VERSION}.{key_id}.{body}.{_b64(key.sign(signed))}"


def verify_decision(proof: str, trusted: dict[str, str], now: datetime) -> DecisionClaims:
    """The claims of a proof signed by a trusted key and fresh at `now`; ProofError otherwise.

    Binding the claims to the decision at hand (session, call, verb, arguments,
    once only) is the caller's job: it knows what the decision is about.
    """
    if len(proof.encode()) > MAX_PROOF_BYTES:
        raise ProofError("the proof is too long")
    parts = proof.split(".")
    if len(parts) != 4 or parts[0] != VERSION:
        raise ProofError("the proof is not a v1 decision proof")
    _, key_id, body, signature = parts
    public = trusted.get(key_id)
    if public is None:
        raise ProofError(f"the proof is signed with a key this session does not trust ({key_id[:40]!r})")
    try:
        Ed25519PublicKey.from_public_bytes(base64.b64decode(public)).verify(
            _unb64(signature), f"{VERSION}.{key_id}.{body}".encode()
        )
        claims = DecisionClaims.model_validate_json(_unb64(body))
    except (InvalidSignature, binascii.Error, ValueError, ValidationError):
        raise ProofError("the proof's signature does not verify") from None
    issued = datetime.fromtimestamp(claims.issued_at, timezone.utc)
    if abs(now - issued) > FRESH_FOR:
        raise ProofError(f"the proof was issued at {issued.isoformat()}, more than {FRESH_FOR} from now")
    return claims
