"""AES-GCM encryption of every payload sent to Temporal (HITL_ENCRYPTION_KEY).

Temporal stores workflow inputs, signals, query results and activity results
in its database and shows them in its UI. A `PayloadCodec` runs in the
client (worker, starter, API) after serialisation, so the server only ever
sees ciphertext; whoever holds a key reads it back through the codec endpoint
(`hitl/api/codec.py`).

The key setting is a comma-separated list: `[keyid:]base64-of-32-bytes`.
The first key encrypts; every key decrypts. Each payload names its key id in
its metadata, so a rotation ("new,old") keeps old sessions readable while new
payloads use the new key. A key without an explicit id gets a stable id
derived from it (a hash prefix, which reveals nothing about the key).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from typing import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from workflows.limits import UNREADABLE_ENCODING, UNREADABLE_REASON, unreadable_reason

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12
MAKE_A_KEY = 'python -c "import base64,os; print(base64.b64encode(os.urandom(32)).decode())"'


class EncryptionKeyError(ValueError):
    """HITL_ENCRYPTION_KEY is malformed: raised at start, before anything connects."""


@dataclass(frozen=True)
class EncryptionKey:
    key_id: str
    secret: bytes = b""

    def __repr__(self) -> str:  # never print the secret
        return f"EncryptionKey(key_id={self.key_id!r})"


def parse_keys(setting: str) -> list[EncryptionKey]:
    """`[keyid:]base64,[keyid:]base64,...` -> keys, the encrypting one first."""
    entries = [entry.strip() for entry in setting.split(",") if entry.strip()]
    if not entries:
        raise EncryptionKeyError("HITL_ENCRYPTION_KEY is set but holds no key")
    keys: list[EncryptionKey] = []
    for number, entry in enumerate(entries, start=1):
        key_id, _, encoded = entry.rpartition(":")
        try:
            secret = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            secret = b""
        if len(secret) != 32:
            raise EncryptionKeyError(
                f"HITL_ENCRYPTION_KEY entry {number} is not [keyid:]base64 of 32 bytes "
                f"(decoded to {len(secret)} bytes); make a key with: {MAKE_A_KEY}"
            )
        key_id = key_id.strip() or derived_key_id(secret)
        if any(known.key_id == key_id for known in keys):
            raise EncryptionKeyError(f"HITL_ENCRYPTION_KEY names key id {key_id!r} twice")
        keys.append(EncryptionKey(key_id, secret))
    return keys


def derived_key_id(secret: bytes) -> str:
    return "k-" + hashlib.sha256(b"hitl-agent key id\0" + secret).hexdigest()[:12]


class AesGcmCodec(PayloadCodec):
    """Encrypts with the first key; decrypts with whichever key a payload names."""

    def __init__(self, keys: Sequence[EncryptionKey]) -> None:
        if not keys:
            raise EncryptionKeyError("an encryption codec needs at least one key")
        self.encrypting = keys[0]
        self.ciphers = {key.key_id: AESGCM(key.secret) for key in keys}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        key_id = self.encrypting.key_id.encode()
        # The key id is bound as associated data: a payload cannot be relabelled.
        sealed = self.ciphers[self.encrypting.key_id].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id}, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        """The payload sealed inside, or an unreadable one that says why not.

        Never raises: the SDK decodes a workflow activation whole, so one payload it cannot open
        (a signal sealed under a key id nobody holds, or altered) would fail that workflow task on
        every retry and strand the session. Handed on unreadable, the payload converter refuses
        it instead, and the session records the signal or Update as refused (workflows/inbound.py).
        """
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was turned on, or not ours
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        cipher = self.ciphers.get(key_id)
        if cipher is None:
            return unreadable(f"payload encrypted with key id {key_id!r}, which is not in HITL_ENCRYPTION_KEY "
                              f"(known: {', '.join(self.ciphers)})")
        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], key_id.encode())
            return Payload.FromString(plain)
        except (InvalidTag, ValueError, DecodeError):
            return unreadable(f"payload under key id {key_id!r} fails authentication: altered, or another key")


def unreadable(reason: str) -> Payload:
    """A payload no converter reads, carrying why in its metadata."""
    return Payload(metadata={"encoding": UNREADABLE_ENCODING, UNREADABLE_REASON: reason[:500].encode()})


def codec_from_setting(setting: str | None) -> AesGcmCodec | None:
    """The codec for HITL_ENCRYPTION_KEY's value, or None when it is unset or empty."""
    if not setting or not setting.strip():
        return None
    return AesGcmCodec(parse_keys(setting))


def why_sealed(payload: Payload) -> str | None:
    """Why this process cannot read `payload` once its codec (if any) has run, or None when it can: sealed
    while HITL_ENCRYPTION_KEY is not set here, or the codec's reason (a key id it lacks, an altered payload)."""
    if payload.metadata.get("encoding") == ENCODING:
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        return f"encrypted with key id {key_id!r}, and HITL_ENCRYPTION_KEY is not set: set it to keys that include {key_id!r}"
    return unreadable_reason(payload.metadata)


def sealed_answer(error: KeyError) -> str | None:
    """What to say when the SDK could not read an answer (a query's, an Update's) because it is
    encrypted: the payload converter raises KeyError, naming only the encoding."""
    text = str(error.args[0] if error.args else "")
    if text == f"Unknown payload encoding {ENCODING.decode()}":
        return ("the session's answer is encrypted (the worker sets HITL_ENCRYPTION_KEY) and HITL_ENCRYPTION_KEY "
                "is not set here: set it to the worker's keys")
    if text == f"Unknown payload encoding {UNREADABLE_ENCODING.decode()}":
        return ("the session's answer is encrypted under a key id that is not in HITL_ENCRYPTION_KEY here: add the "
                "worker's key with its key id")
    return None
