"""activities/mcp/connection.py negotiates the MCP revision with the SDK's own policy (server/discover,
falling back to the initialize handshake), imported from a private module of mcp 2.3 because its only
public caller, mcp.Client(mode="auto"), cannot run on the connection's own session. An SDK upgrade
that moves or changes it must fail here, by name, rather than as a worker that cannot connect."""

from __future__ import annotations

import importlib
import inspect


def test_the_sdks_auto_negotiation_is_where_the_connection_imports_it() -> None:
    try:
        probe = importlib.import_module("mcp.client._probe")
    except ImportError as error:
        raise AssertionError(f"mcp no longer has mcp.client._probe ({error}): find where mcp.Client(mode='auto') "
                             "negotiates now and import that in activities/mcp/connection.py") from None
    negotiate_auto = getattr(probe, "negotiate_auto", None)
    assert negotiate_auto is not None, "mcp.client._probe.negotiate_auto is gone: see activities/mcp/connection.py"
    assert list(inspect.signature(negotiate_auto).parameters) == ["session"], inspect.signature(negotiate_auto)
    # Still the SDK's own policy: the public Client's auto mode calls this very function.
    assert importlib.import_module("mcp.client.client").negotiate_auto is negotiate_auto
