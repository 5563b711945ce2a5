"""Email decision links: `{public_url}/decide/<token>`, one per choice, each the credential for one decision.

The worker makes them when it mails a pause (activities/mail.py); the API checks
them (hitl/api/decide_links.py) before it decides through `decide()` as the
person the link names. A token is `m1.<base64url claims JSON>.<base64url HMAC>`
and binds the person, the session and its chain of runs, the call, the
arguments' digest, the choice and the pause's deadline; every link of one mail
shares the mail's `mail` id, which the API uses up with the first decision made
from that mail. The chain is the session's first run's id (a hand-over keeps
it): a session closed and started again under the same id is another chain,
where the link decides nothing.

The key is its own: HKDF-SHA256 of the decision-signing seed with a label of
its own (hitl/decision_keys.py, `email_link_key`), so it is never the key that
signs decision proofs, and a link key cannot sign a proof. The API derives it
from its signing key; a worker reads it from HITL_EMAIL_LINK_KEY or derives it
from the same local key file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any, Literal

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import BaseModel, ConfigDict, ValidationError

VERSION = "m1"
LABEL = b"hitl email decision links v1"
MAX_TOKEN_CHARS = 4_000
LinkVerb = Literal["approve", "reject", "answer"]


class LinkRefused(Exception):
    """A link that decides nothing; `status` is the page's answer, the message says why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class LinkClaims(BaseModel):
    """What one link lets its holder do: this person's one decision on this call, until then."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    person: str
    session_id: str
    call_id: str
    args_sha256: str
    verb: LinkVerb
    answer: str | None = None  # the question's choice, for `answer`
    expires: int  # unix seconds: the pause's deadline
    mail: str  # the id of the mail the link came in: one decision per mail
    # The session's chain of runs the pause was in (its first run's id). Absent in links made
    # before links named it: those decide nothing.
    chain: str | None = None

    @property
    def choice(self) -> str:
        return self.answer if self.verb == "answer" and self.answer is not None else self.verb


def link_key_from_seed(seed: bytes) -> bytes:
    """The links' key from the decision-signing seed: a key of its own, not the seed."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=LABEL).derive(seed)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())


def make_link_token(key: bytes, claims: LinkClaims) -> str:
    body = f"{VERSION}.{_b64(claims.model_dump_json(exclude_none=True).encode())}"
    return f"{body}.{_mac(key, body)}"


def read_link_token(key: bytes, token: str, now: float) -> LinkClaims:
    """The claims of a genuine, unexpired token; LinkRefused otherwise (whether used up is the API's)."""
    body, _, mac = token.rpartition(".")
    if len(token) > MAX_TOKEN_CHARS or not body.startswith(f"{VERSION}.") or \
            not hmac.compare_digest(mac.encode(), _mac(key, body).encode()):
        raise LinkRefused(400, "this link is not one this service made, or it was changed on the way: it decides nothing")
    try:
        claims = LinkClaims.model_validate(json.loads(_unb64(body.split(".", 1)[1])))
    except (binascii.Error, ValueError, ValidationError):
        raise LinkRefused(400, "this link cannot be read: it decides nothing") from None
    if now >= claims.expires:
        raise LinkRefused(410, f"this link expired with the pause's deadline: {call_of(claims)} is no longer decided by mail")
    return claims


def call_of(claims: LinkClaims) -> str:
    return f"call {claims.call_id} of session {claims.session_id}"


def choices_of(item: dict[str, Any]) -> list[tuple[LinkVerb, str | None]]:
    """The choices a mail offers, one link each: approve and reject, or a question's own choices
    (a question with free text or fields is answered in the web inbox)."""
    if item.get("kind") == "question":
        return [("answer", choice) for choice in item.get("choices") or []]
    return [("approve", None), ("reject", None)]


def choice_label(verb: LinkVerb, answer: str | None) -> str:
    return {"approve": "Approve", "reject": "Reject"}.get(verb) or f"Answer: {answer}"
