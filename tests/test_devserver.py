
"""The embedded dev server (demo, benchmarks) registers the sessions' search attributes."""

from __future__ import annotations

import pytest

import json
import re
from pathlib import Path

from devserver import SEARCH_ATTRIBUTES

pytestmark = pytest.mark.system  # the product's own processes, or a server started, killed or proxied here
from tests.stack import private_dev_server, temporal_cli


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
