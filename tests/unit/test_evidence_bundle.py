"""The evidence bundle: it verifies with the public key alone, and names the first record altered,
removed or moved; another key, a cut end or a forged line are caught."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hitl.evidence.bundle import EvidenceError, load_private_key, load_public_key, new_key, records_of, verify_bundle, write_bundle
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

pytestmark = pytest.mark.unit

RECORDS = [{"event": "requested", "call_id": f"call_{n}", "tool": "delete_file", "by": "bob"} for n in range(1, 7)]


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def bundle(key: Ed25519PrivateKey) -> list[str]:
    return write_bundle(RECORDS, key, {"session": "s-1"}).splitlines(keepends=True)


def test_an_untouched_bundle_verifies_and_reads_back(key: Ed25519PrivateKey) -> None:
    text = "".join(bundle(key))
    assert verify_bundle(text, key.public_key()).intact
    assert records_of(text) == RECORDS


@pytest.mark.parametrize("seed", range(20))
def test_one_flipped_byte_anywhere_in_a_record_names_that_record(key: Ed25519PrivateKey, seed: int) -> None:
    lines = bundle(key)
    rng = random.Random(seed)
    line_number = rng.randrange(2, len(lines))  # a record line (1 is the header, the last the seal)
    line = bytearray(lines[line_number - 1].encode())
    position = rng.randrange(len(line) - 1)
    line[position] ^= 1 << rng.randrange(7)
    lines[line_number - 1] = line.decode(errors="replace")
    verdict = verify_bundle("".join(lines), key.public_key())
    assert not verdict.intact
    assert verdict.problem is not None and verdict.problem.startswith(f"line {line_number}")


def test_a_changed_value_is_named_even_when_the_json_stays_valid(key: Ed25519PrivateKey) -> None:
    lines = bundle(key)
    record = json.loads(lines[3])
    record["data"]["by"] = "mallory"
    lines[3] = json.dumps(record) + "\n"
    assert verify_bundle("".join(lines), key.public_key()).problem == (
        "line 4 (record 3): altered, its content does not match its signature")


def test_a_dropped_record_is_named_missing(key: Ed25519PrivateKey) -> None:
    lines = bundle(key)
    del lines[3]  # record 3
    assert verify_bundle("".join(lines), key.public_key()).problem == (
        "line 4: record 3 is missing (record 4 follows record 2)")


def test_two_swapped_records_are_named_out_of_order(key: Ed25519PrivateKey) -> None:
    lines = bundle(key)
    lines[3], lines[4] = lines[4], lines[3]  # records 3 and 4
    assert verify_bundle("".join(lines), key.public_key()).problem == (
        "line 4: record 4 is out of order (record 3 is at line 5)")


def test_a_bundle_cut_short_or_resealed_by_someone_else_fails(key: Ed25519PrivateKey) -> None:
    lines = bundle(key)
    assert "the seal is missing" in str(verify_bundle("".join(lines[:-1]), key.public_key()).problem)
    assert "the seal" in str(verify_bundle("".join(lines[:-2] + lines[-1:]), key.public_key()).problem)
    other = Ed25519PrivateKey.generate()
    assert "signed with another key" in str(verify_bundle("".join(lines), other.public_key()).problem)


def test_a_record_from_another_bundle_of_the_same_key_does_not_fit_the_chain(key: Ed25519PrivateKey) -> None:
    lines = bundle(key)
    foreign = write_bundle([{"event": "approved", "by": "mallory"}] * 3, key, {"session": "s-2"}).splitlines(True)
    lines[3] = foreign[3]  # validly signed, record 3, but of another chain
    assert verify_bundle("".join(lines), key.public_key()).problem == (
        "line 4 (record 3): does not follow the line before it (a record from elsewhere, or one removed before it)")


def test_keys_round_trip_through_their_pem_files(tmp_path) -> None:
    private, public = new_key()
    (tmp_path / "k").write_bytes(private)
    (tmp_path / "k.pub").write_bytes(public)
    signer = load_private_key(str(tmp_path / "k"))
    text = write_bundle(RECORDS, signer, {})
    assert verify_bundle(text, load_public_key(str(tmp_path / "k.pub"))).intact


def test_a_key_that_cannot_be_used_is_one_line_naming_the_setting_and_why(tmp_path: Path) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "text").write_text("not a key")
    (tmp_path / "ec").write_bytes(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    (tmp_path / "ec.pub").write_bytes(other.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def refusal(load: Callable[[str], Any], name: str) -> str:
        with pytest.raises(EvidenceError) as refused:
            load(str(tmp_path / name))
        return str(refused.value).replace(str(tmp_path), "DIR")

    assert refusal(load_private_key, "missing") == "HITL_EVIDENCE_KEY=DIR/missing: cannot read it: No such file or directory"
    assert refusal(load_private_key, "text").startswith("HITL_EVIDENCE_KEY=DIR/text: not an unencrypted PEM private key (")
    assert refusal(load_private_key, "ec") == (
        "HITL_EVIDENCE_KEY=DIR/ec: an Ed25519 key is needed (`starter.py evidence key` makes one)")
    assert refusal(load_public_key, "missing") == "--public-key DIR/missing: cannot read it: No such file or directory"
    assert refusal(load_public_key, "text").startswith("--public-key DIR/text: not a PEM public key (")
    assert refusal(load_public_key, "ec.pub") == "--public-key DIR/ec.pub: not an Ed25519 public key"
