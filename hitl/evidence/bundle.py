"""The evidence bundle: JSON Lines, hash-chained, every line signed with Ed25519.

A bundle is a header line, one line per record and a seal line. Each record holds its sequence
number, the hash of the line before it (the header's for the first) and its data; its `hash` is
the SHA-256 of those three in canonical JSON, and its `signature` the operator key's Ed25519
signature of that hash. The seal signs the count and the last hash, so records cut from the end
are seen too. Every line is signed on its own, so a verifier names the first line that was
altered (its content no longer matches its signature), removed (a sequence number skipped) or
moved (a number out of its place), instead of only saying that the whole file is wrong.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

FORMAT = "hitl-evidence/1"


class EvidenceError(Exception):
    """A key or a bundle that cannot be used, in one line."""


def canonical(value: Any) -> bytes:
    """The one byte string a JSON value hashes to: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ------------------------------------------------------------------ keys


def new_key() -> tuple[bytes, bytes]:
    """A fresh Ed25519 key pair as PEM: (private, public)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return private, public_pem(key.public_key())


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(key: Ed25519PublicKey) -> str:
    """Which key signed a bundle: the SHA-256 of its raw public bytes."""
    return hashlib.sha256(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).hexdigest()


def load_private_key(path: str, setting: str = "HITL_EVIDENCE_KEY") -> Ed25519PrivateKey:
    label = f"{setting}={path}"
    key = _pem_key(label, path, lambda pem: serialization.load_pem_private_key(pem, password=None),
                   "not an unencrypted PEM private key")
    if not isinstance(key, Ed25519PrivateKey):
        raise EvidenceError(f"{label}: an Ed25519 key is needed (`starter.py evidence key` makes one)")
    return key


def load_public_key(path: str) -> Ed25519PublicKey:
    label = f"--public-key {path}"
    key = _pem_key(label, path, serialization.load_pem_public_key, "not a PEM public key")
    if not isinstance(key, Ed25519PublicKey):
        raise EvidenceError(f"{label}: not an Ed25519 public key")
    return key


def _pem_key(label: str, path: str, parse: Callable[[bytes], object], not_pem: str) -> object:
    """The key `parse` reads from the file at `path`; an EvidenceError naming `label` when the file
    cannot be read or holds no such key."""
    try:
        return parse(Path(path).read_bytes())
    except OSError as error:
        raise EvidenceError(f"{label}: cannot read it: {error.strerror or error}") from None
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise EvidenceError(f"{label}: {not_pem} ({error})") from None


# ------------------------------------------------------------------ writing


def _signed(line: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    digest = sha256_hex(line)
    return {**line, "hash": digest, "signature": _b64(key.sign(bytes.fromhex(digest)))}


def write_bundle(records: Iterable[dict[str, Any]], key: Ed25519PrivateKey, scope: dict[str, Any],
                 created_at: datetime | None = None) -> str:
    """The bundle's text: a header naming the scope and the key, the chained records, the seal."""
    created = (created_at or datetime.now(timezone.utc)).isoformat()
    header = _signed({"kind": "header", "format": FORMAT, "created_at": created, "scope": scope,
                      "key_id": key_id(key.public_key())}, key)
    lines = [header]
    previous = header["hash"]
    for seq, data in enumerate(records, start=1):
        line = _signed({"kind": "record", "seq": seq, "prev": previous, "data": data}, key)
        lines.append(line)
        previous = line["hash"]
    lines.append(_signed({"kind": "seal", "count": len(lines) - 1, "last": previous}, key))
    return "".join(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n" for line in lines)


# ------------------------------------------------------------------ verifying


@dataclass(frozen=True)
class Verdict:
    intact: bool
    records: int
    problem: str | None = None  # the first thing wrong, naming its record and line


def _check_line(line: dict[str, Any], key: Ed25519PublicKey) -> bool:
    """Whether the line's content is what its hash says and the key signed that hash."""
    body = {name: value for name, value in line.items() if name not in ("hash", "signature")}
    if not isinstance(line.get("hash"), str) or not isinstance(line.get("signature"), str):
        return False
    try:
        if sha256_hex(body) != line["hash"]:
            return False
    except ValueError:  # a value no signed line holds: a lone surrogate, a NaN
        return False
    try:
        key.verify(base64.b64decode(line["signature"], validate=True), bytes.fromhex(line["hash"]))
    except (InvalidSignature, ValueError):
        return False
    return True


class Unreadable(str):
    """Why a line of the bundle could not be read as one JSON object."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each given once: a line that names a key twice reads as one thing
    to this verifier and as another to a reader that keeps the first value."""
    value = dict(pairs)
    if len(value) != len(pairs):
        raise KeyError("twice")
    return value


def _line(raw: str) -> dict[str, Any] | Unreadable:
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, object_pairs_hook=_keys_once)
    except KeyError:
        return Unreadable("a key appears twice in it")
    except RecursionError:
        return Unreadable("it is nested too deeply to read")
    except ValueError:
        return Unreadable("it is no longer JSON")
    return value if isinstance(value, dict) else Unreadable("it is no longer JSON")


def _parsed(text: str) -> list[dict[str, Any] | Unreadable]:
    return [_line(raw) for raw in text.splitlines() if raw.strip()]


def verify_bundle(text: str, key: Ed25519PublicKey) -> Verdict:
    """Check every line against the key and the chain; name the first record altered, missing or
    out of order. Needs nothing but the bundle and the public key."""
    lines = _parsed(text)
    if not lines or isinstance(lines[0], Unreadable) or lines[0].get("kind") != "header":
        return Verdict(False, 0, "line 1: not a bundle header")
    header = lines[0]
    if header.get("format") != FORMAT:
        return Verdict(False, 0, f"line 1: format {header.get('format')!r}, not {FORMAT}")
    if not _check_line(header, key):
        if header.get("key_id") != key_id(key):
            return Verdict(False, 0, "line 1: the bundle was signed with another key (key_id "
                                     f"{str(header.get('key_id'))[:16]}..., this key {key_id(key)[:16]}...)")
        return Verdict(False, 0, "line 1: the header was altered")
    sequence_at = {line["seq"]: number for number, line in enumerate(lines, start=1)
                   if isinstance(line, dict) and line.get("kind") == "record" and type(line.get("seq")) is int}
    previous, expected = header["hash"], 1
    for number, line in enumerate(lines[1:], start=2):
        if isinstance(line, Unreadable):
            return Verdict(False, expected - 1, f"line {number} (record {expected}): altered, {line}")
        if line.get("kind") == "seal":
            return _check_seal(line, number, previous, expected - 1, lines, key)
        if line.get("kind") != "record" or not _check_line(line, key):
            return Verdict(False, expected - 1, f"line {number} (record {expected}): altered, "
                                                "its content does not match its signature")
        if line.get("seq") != expected:
            if expected in sequence_at:
                return Verdict(False, expected - 1, f"line {number}: record {line.get('seq')} is out of order "
                                                    f"(record {expected} is at line {sequence_at[expected]})")
            return Verdict(False, expected - 1, f"line {number}: record {expected} is missing "
                                                f"(record {line.get('seq')} follows record {expected - 1})")
        if line.get("prev") != previous:
            return Verdict(False, expected - 1, f"line {number} (record {expected}): does not follow the line "
                                                "before it (a record from elsewhere, or one removed before it)")
        previous, expected = line["hash"], expected + 1
    return Verdict(False, expected - 1, f"the seal is missing: the bundle was cut after record {expected - 1}")


def _check_seal(seal: dict[str, Any], number: int, previous: str, count: int,
                lines: list[dict[str, Any] | Unreadable], key: Ed25519PublicKey) -> Verdict:
    if not _check_line(seal, key):
        return Verdict(False, count, f"line {number} (the seal): altered")
    if seal.get("count") != count or seal.get("last") != previous:
        return Verdict(False, count, f"line {number} (the seal): it closes {seal.get('count')} records, "
                                     f"the bundle holds {count}: records were removed or added")
    if number != len(lines):
        return Verdict(False, count, f"line {number + 1}: lines after the seal")
    return Verdict(True, count)


def records_of(text: str) -> list[dict[str, Any]]:
    """The records' data, in order (for reading a bundle that verified)."""
    return [line["data"] for line in _parsed(text) if isinstance(line, dict) and line.get("kind") == "record"]
