
"""The embedded dev server (demo, benchmarks) registers the sessions' search attributes."""

from __future__ import annotations

import pytest

import json
import os
import re
from pathlib import Path

from hitl.devserver import SEARCH_ATTRIBUTES, free_port, start_dev_server, stop_dev_server


from tests.support.stack import private_dev_server, temporal_cli


def indexed_type(kind: str) -> str:
    """KeywordList -> INDEXED_VALUE_TYPE_KEYWORD_LIST, as the server names the types."""
    return "INDEXED_VALUE_TYPE_" + re.sub(r"(?<!^)(?=[A-Z])", "_", kind).upper()


def test_the_embedded_dev_server_registers_the_search_attributes(tmp_path: Path) -> None:
    with private_dev_server(tmp_path) as server:
        listed = temporal_cli("operator", "search-attribute", "list", "--address", server.address, "--output", "json")
        assert listed.returncode == 0, listed.stderr
        waiting = temporal_cli("workflow", "list", "--address", server.address, "--query", 'HitlState="awaiting_human"')
    registered = json.loads(listed.stdout)["customAttributes"]
    assert {name: registered.get(name) for name in SEARCH_ATTRIBUTES} == {
        name: indexed_type(kind) for name, kind in SEARCH_ATTRIBUTES.items()
    }
    assert waiting.returncode == 0, waiting.stderr


def test_a_ctrl_c_meant_for_the_demo_does_not_reach_its_dev_server(tmp_path: Path) -> None:
    """The demo stops its worker before its server; a server in the terminal's process group died
    with the keypress first, and the worker then retried its polls against nothing for minutes."""
    port = free_port()
    process = start_dev_server(tmp_path / "temporal.db", port=port, ui_port=free_port())
    try:
        assert os.getpgid(process.pid) != os.getpgid(0)
    finally:
        stop_dev_server(process)


def test_a_dev_server_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    """A newcomer whose UI port was taken got a traceback ending "see .hitl/temporal.log"."""
    import socket

    from hitl.devserver import DevServerError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(DevServerError) as refused:
            start_dev_server(tmp_path / "temporal.db", port=free_port(), ui_port=taken.getsockname()[1])
    assert "address already in use" in str(refused.value) and "temporal.log" in str(refused.value)
