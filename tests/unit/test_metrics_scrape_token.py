"""The scrape token of `GET /metrics` opens the figures of every person who decides: like people's
tokens, one too short to resist guessing stops the API at start with the reason."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.stack import free_port, product_env

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def serve_until_it_answers_or_exits(tmp_path: Path, **variables: str) -> tuple[int | None, str]:
    """`starter.py serve`: its exit code and output when it stops by itself, or (None, ...) once
    /healthz answers (then it is stopped)."""
    port, log = free_port(), tmp_path / "api.log"
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"olga-token-0123456789": "olga"}')
    process = subprocess.Popen([sys.executable, "starter.py", "serve", "--port", str(port)], cwd=ROOT,
                               env=product_env(HITL_API_TOKENS=str(tokens), **variables),
                               stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    try:
        while process.poll() is None:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
                return None, log.read_text()
            except OSError:
                assert time.monotonic() < deadline, f"starter.py serve neither answered nor stopped: {log.read_text()}"
                time.sleep(0.1)
        return process.returncode, log.read_text()
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=15)


@pytest.mark.parametrize("token", ["x", "prometheus", "0123456789abcde"])
def test_a_short_scrape_token_stops_the_api_at_start(tmp_path: Path, token: str) -> None:
    code, output = serve_until_it_answers_or_exits(tmp_path, HITL_METRICS_TOKEN=token)
    assert code not in (None, 0), f"the API served with HITL_METRICS_TOKEN={token!r}"
    assert "HITL_METRICS_TOKEN" in output and "shorter than 16" in output and "Traceback" not in output, output


def test_a_long_enough_scrape_token_serves(tmp_path: Path) -> None:
    code, output = serve_until_it_answers_or_exits(tmp_path, HITL_METRICS_TOKEN="scrape-token-0123456789abcdef")
    assert code is None, output
