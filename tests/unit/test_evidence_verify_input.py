"""`starter.py evidence verify` on whatever file it is given: one line and exit 1 for a bundle that is
not intact, never a traceback; and a line whose bytes say two things (a key given twice) does not verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitl.evidence.bundle import public_pem, verify_bundle, write_bundle
from tests.support.stack import nobody_listens, run_starter

pytestmark = pytest.mark.unit

KEY = Ed25519PrivateKey.generate()
RECORDS = [{"event": "requested", "call_id": "call_1", "tool": "delete_file", "by": "ana"},
           {"event": "approved", "call_id": "call_1", "by": "bob"}]
LINES = write_bundle(RECORDS, KEY, {"session": "s-1"}).splitlines()
HEADER, FIRST, SECOND, SEAL = LINES


def replaced(line: str, old: str, new: str) -> str:
    assert old in line, (old, line)
    return line.replace(old, new, 1)


# Each a bundle that was tampered with in a way Python's JSON reads but cannot hash or index.
MALFORMED = {
    "a NaN in a record": [HEADER, replaced(FIRST, '"by": "ana"', '"by": NaN'), SECOND, SEAL],
    "an Infinity in the header": [replaced(HEADER, '"kind"', '"x": Infinity, "kind"'), FIRST, SECOND, SEAL],
    "a lone surrogate in a record": [HEADER, replaced(FIRST, '"by": "ana"', '"by": "\\ud800"'), SECOND, SEAL],
    "a record whose seq is a list": [HEADER, '{"kind": "record", "seq": [1]}', FIRST, SECOND, SEAL],
    "a record whose seq is an object": [HEADER, FIRST, '{"kind": "record", "seq": {"a": 1}}', SECOND, SEAL],
    "nesting deeper than a parser goes": [HEADER, "[" * 100_000 + "]" * 100_000, FIRST, SECOND, SEAL],
}


@pytest.fixture(scope="module")
def public_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("key") / "operator.key.pub"
    path.write_bytes(public_pem(KEY.public_key()))
    return path


async def verify(tmp_path: Path, public_key: Path, lines: list[str]) -> tuple[int, str, str]:
    bundle = tmp_path / "bundle.jsonl"
    bundle.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ran = await run_starter("evidence", "verify", str(bundle), "--public-key", str(public_key),
                            TEMPORAL_ADDRESS=nobody_listens())
    return ran.returncode, ran.stdout, ran.stderr


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_a_malformed_line_is_named_in_one_line_not_a_traceback(tmp_path: Path, public_key: Path, case: str) -> None:
    code, out, err = await verify(tmp_path, public_key, MALFORMED[case])
    assert "Traceback" not in err, err[-600:]
    assert code == 1 and out == "", (code, out, err)
    assert err.startswith("NOT intact: line ") and err.count("\n") == 1, err


async def test_a_key_given_twice_in_a_line_does_not_verify(tmp_path: Path, public_key: Path) -> None:
    """A reader that keeps a key's first value would see "mallory"; the verifier keeps the last one,
    which was signed: the line's bytes say two things, so it is not the line that was signed."""
    doubled = FIRST.replace("{", '{"data": {"event": "requested", "by": "mallory"}, ', 1)
    assert json.loads(doubled) == json.loads(FIRST)
    code, out, err = await verify(tmp_path, public_key, [HEADER, doubled, SECOND, SEAL])
    assert (code, err) == (1, "NOT intact: line 2 (record 1): altered, a key appears twice in it\n"), (code, out, err)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(), st.from_regex(r"\A\{.*\}\Z"),
                          st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
                                       lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                                       max_leaves=20).map(lambda value: json.dumps(value))),
                max_size=6),
       st.integers(min_value=0, max_value=3))
def test_any_line_anywhere_gives_a_verdict(extra: list[str], at: int) -> None:
    lines = list(LINES)
    lines[at:at] = extra
    verdict = verify_bundle("\n".join(lines), KEY.public_key())
    assert verdict.intact == (not any(line.strip() for line in extra))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=3),
       st.sampled_from(["data", "seq", "prev", "kind", "hash", "signature", "format", "key_id", "count", "last"]),
       JSON_VALUES)
def test_any_value_in_any_field_of_any_line_gives_a_verdict(at: int, name: str, value: object) -> None:
    lines = list(LINES)
    line = json.loads(lines[at])
    unchanged = name in line and line[name] == value and type(line[name]) is type(value)
    line[name] = value
    lines[at] = json.dumps(line)
    assert verify_bundle("\n".join(lines), KEY.public_key()).intact == unchanged
