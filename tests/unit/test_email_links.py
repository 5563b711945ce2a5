"""Email decision links as the API reads them: a link the worker made says whose decision it is,
on which call, in which chain of runs of its session, with which arguments, and until when; a
changed or expired one decides nothing."""

from __future__ import annotations

import base64
import os

import pytest

from hitl.decision_keys import email_link_key, worker_email_link_key
from hitl.email_links import LinkClaims, LinkRefused, link_key_from_seed, make_link_token, read_link_token

CLAIMS = LinkClaims(person="ana", session_id="s-1", call_id="call_1", args_sha256="ab" * 32, verb="approve",
                    expires=2_000_000_000, mail="m-1", chain="first-run-of-s-1")
KEY = link_key_from_seed(b"\x01" * 32)


def test_a_link_made_with_the_key_reads_back_as_made() -> None:
    assert read_link_token(KEY, make_link_token(KEY, CLAIMS), now=1_900_000_000) == CLAIMS


@pytest.mark.parametrize("change", ["person", "args", "chain", "signature", "key", "version"])
def test_a_changed_link_decides_nothing(change: str) -> None:
    token = make_link_token(KEY, CLAIMS)
    version, body, mac = token.split(".")
    if change == "person":
        token = make_link_token(KEY, CLAIMS.model_copy(update={"person": "eve"})).split(".")[1]
        token = f"{version}.{token}.{mac}"
    elif change == "args":
        token = f"{version}.{make_link_token(KEY, CLAIMS.model_copy(update={'args_sha256': 'cd' * 32})).split('.')[1]}.{mac}"
    elif change == "chain":  # the same session id, another session under it
        token = f"{version}.{make_link_token(KEY, CLAIMS.model_copy(update={'chain': 'a-later-run'})).split('.')[1]}.{mac}"
    elif change == "signature":
        token = f"{version}.{body}.{mac[:-2]}{'AA' if mac[-2:] != 'AA' else 'BB'}"
    elif change == "key":
        token = make_link_token(link_key_from_seed(b"\x02" * 32), CLAIMS)
    else:
        token = f"v1.{body}.{mac}"
    with pytest.raises(LinkRefused) as refused:
        read_link_token(KEY, token, now=1_900_000_000)
    assert refused.value.status == 400 and "decides nothing" in str(refused.value)


def test_a_link_past_the_pauses_deadline_is_refused_as_expired() -> None:
    with pytest.raises(LinkRefused) as refused:
        read_link_token(KEY, make_link_token(KEY, CLAIMS), now=CLAIMS.expires)
    assert refused.value.status == 410 and "expired" in str(refused.value)


def test_the_link_key_is_derived_and_never_the_signing_seed(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The API and a worker on one machine agree on the key; it is not the seed that signs proofs;
    a worker elsewhere reads it from HITL_EMAIL_LINK_KEY, and one with neither is told what to set."""
    seed = os.urandom(32)
    monkeypatch.setenv("HITL_KEYS_DIR", str(tmp_path))
    monkeypatch.delenv("HITL_EMAIL_LINK_KEY", raising=False)
    monkeypatch.delenv("HITL_SIGNING_KEY", raising=False)
    with pytest.raises(ValueError, match="HITL_EMAIL_LINK_KEY"):
        worker_email_link_key()
    monkeypatch.setenv("HITL_SIGNING_KEY", "k:" + base64.b64encode(seed).decode())
    assert worker_email_link_key() == email_link_key() == link_key_from_seed(seed) != seed
    monkeypatch.delenv("HITL_SIGNING_KEY")
    monkeypatch.setenv("HITL_EMAIL_LINK_KEY", base64.b64encode(link_key_from_seed(seed)).decode())
    assert worker_email_link_key() == link_key_from_seed(seed)
