"""The keys behind verified decisions (workflows/proofs.py).

The API signs with a private key; workers trust public keys. Both come from
the environment in production:

- `HITL_SIGNING_KEY` (API): base64 of a 32-byte Ed25519 seed, optionally
  `keyid:base64`.
- `HITL_TRUSTED_KEYS` (worker): comma-separated `keyid:base64-public-key`
  (several during a rotation).

- `HITL_EMAIL_LINK_KEY` (worker, with email in HITL_CHANNELS): base64 of the
  key that signs email decision links (hitl/email_links.py), which
  `python -m hitl.decision_keys email-link` prints on the API's side.

On one machine none is needed: the API creates a key file in
`HITL_KEYS_DIR` (default `./.hitl`, mode 0600) on first use and a worker that
has no `HITL_TRUSTED_KEYS` trusts that file's public key. The folder is not
the workspace: no tool can read it.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from hitl.email_links import link_key_from_seed
from workflows.proofs import public_key_b64

KEY_FILE_NAME = "decision-signing.key"
DEFAULT_KEY_ID = "local"


class KeyConfigError(ValueError):
    """A key setting that cannot be used; the message says which and why."""


def key_file() -> Path:
    return Path(os.environ.get("HITL_KEYS_DIR", ".hitl")) / KEY_FILE_NAME


def _split(entry: str) -> tuple[str, str]:
    key_id, _, encoded = entry.strip().rpartition(":")
    return (key_id or DEFAULT_KEY_ID), encoded


def _seed(encoded: str, setting: str) -> bytes:
    try:
        seed = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise KeyConfigError(f"{setting} is not base64") from None
    if len(seed) != 32:
        raise KeyConfigError(f"{setting} must be 32 bytes of base64 (got {len(seed)})")
    return seed


def signing_key() -> tuple[str, Ed25519PrivateKey]:
    """The API's key: HITL_SIGNING_KEY, or the local key file (created on first use)."""
    setting = os.environ.get("HITL_SIGNING_KEY", "").strip()
    if setting:
        key_id, encoded = _split(setting)
        return key_id, Ed25519PrivateKey.from_private_bytes(_seed(encoded, "HITL_SIGNING_KEY"))
    path = key_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        raw = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(base64.b64encode(raw).decode() + "\n")
    return DEFAULT_KEY_ID, Ed25519PrivateKey.from_private_bytes(_seed(path.read_text().strip(), str(path)))


def trusted_keys() -> dict[str, str]:
    """Public keys a worker trusts: HITL_TRUSTED_KEYS, else the local key file's, else none."""
    setting = os.environ.get("HITL_TRUSTED_KEYS", "").strip()
    if setting:
        trusted = {}
        for entry in setting.split(","):
            key_id, encoded = _split(entry)
            _seed(encoded, "HITL_TRUSTED_KEYS")  # a public key is 32 bytes too
            trusted[key_id] = encoded
        return trusted
    if has_signing_key():
        key_id, key = signing_key()
        return {key_id: public_key_b64(key)}
    return {}


def has_signing_key() -> bool:
    return bool(os.environ.get("HITL_SIGNING_KEY", "").strip()) or key_file().exists()


def link_key_of(key: Ed25519PrivateKey) -> bytes:
    """The key of email decision links, derived from a signing key: never the signing key itself."""
    return link_key_from_seed(key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))


def email_link_key() -> bytes:
    """The links' key from this API's signing key (the API's side, and `email-link`'s)."""
    return link_key_of(signing_key()[1])


def worker_email_link_key() -> bytes:
    """The links' key as a worker has it: HITL_EMAIL_LINK_KEY, else derived from the signing key
    this machine holds (one machine); KeyConfigError when it has neither."""
    setting = os.environ.get("HITL_EMAIL_LINK_KEY", "").strip()
    if setting:
        return _seed(setting, "HITL_EMAIL_LINK_KEY")
    if has_signing_key():
        return email_link_key()
    raise KeyConfigError("email in HITL_CHANNELS needs HITL_EMAIL_LINK_KEY (`python -m hitl.decision_keys email-link` "
                         "prints it where the API's signing key is) or this machine's key file")


if __name__ == "__main__":
    import sys

    USAGE = ("usage: python -m hitl.decision_keys public | email-link   (public: keyid:public-key for HITL_TRUSTED_KEYS; "
             "email-link: the worker's HITL_EMAIL_LINK_KEY; with no HITL_SIGNING_KEY it makes the key file in "
             "HITL_KEYS_DIR (.hitl/) if there is none, as `serve` does)")
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(USAGE)
        raise SystemExit(0)
    if sys.argv[1:] not in (["public"], ["email-link"]):
        raise SystemExit(USAGE)
    try:
        key_id, key = signing_key()
    except KeyConfigError as error:
        raise SystemExit(f"decision_keys: {error}") from None
    if sys.argv[1] == "email-link":
        print(base64.b64encode(email_link_key()).decode())
    else:
        print(f"{key_id}:{public_key_b64(key)}")
