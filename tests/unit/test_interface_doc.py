"""docs/interface.md says what the code does: its tables are read here and compared with the code.

Signals, Updates and queries with workflows/contract.py (the status and pending answers with its
models; the audit with AuditEvent), the HTTP answers that name a model (POST /sessions' Started, GET
/inbox's InboxItem) with it, the session's input keys with its input model, the HTTP routes with the FastAPI app's, and the environment variables with every
`HITL_*`, `TEMPORAL_*` and `OPENAI_*` name in the product's source, each both ways: a name the
code gains and the page lacks fails here, and so does one the page keeps after the code dropped it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from pydantic import BaseModel

from hitl.api.app import create_app
from hitl.api.sessions import Started
from hitl.client.inbox import InboxItem
from hitl.client.sessions import MissingItems
from workflows import contract
from workflows.session import AuditEvent, AuditEventKind

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "interface.md").read_text()
SOURCES = ("hitl", "activities", "workflows", "worker.py", "starter.py")
VARIABLE = re.compile(r"\b(?:HITL|TEMPORAL|OPENAI)_[A-Z0-9_]*(?:[A-Z0-9]\b|_\*)")
ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)`")
NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")


def table_after(marker: str) -> list[list[str]]:
    """The cells of the first markdown table after the line holding `marker` (header and rule left out)."""
    lines = DOC.splitlines()
    start = next(index for index, line in enumerate(lines) if marker in line)
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif rows:
            break
    return [row for row in rows[2:]]


def names_in(cell: str) -> list[str]:
    return NAME.findall(cell)


def test_the_signals_and_their_updates_are_the_contracts() -> None:
    rows = table_after("**Signals and their Updates.**")
    assert {(row[0], row[1]) for row in rows} == {
        (f"`{entry.signal.name}`", f"`{entry.update.name}`") for entry in contract.INBOUND.values()
    }
    others = {update.name for update in contract.UPDATES} - {entry.update.name for entry in contract.INBOUND.values()}
    for name in others:
        assert f"`{name}`" in DOC, f"the Update {name} is not described in docs/interface.md"


def test_the_queries_are_the_contracts() -> None:
    documented = {name for row in table_after("**Queries**") for name in names_in(row[0])}
    assert documented == {query.name for query in contract.QUERIES}


def test_the_status_and_pending_answers_list_the_contracts_fields() -> None:
    """Every field of SessionStatus and PendingItem, and no other, in the queries' table (the
    input schema is never sent; `approving` and `at_deadline` are the HTTP API's, in its table)."""
    answers = {row[0]: set(KEYS.findall(row[1])) for row in table_after("**Queries**")}
    assert answers["`status`"] == set(contract.SessionStatus.model_fields)
    assert answers["`pending`"] == set(contract.PendingItem.model_fields) - {"input_schema", "approving", "at_deadline"}


KEYS = re.compile(r'(?<!: )(?<!or )"([a-z_0-9]+)"')  # not a value: `"kind": "approval" or "question"`


def route_row(route: str) -> str:
    """The HTTP routes table's row of `route` (its first cell starts with it)."""
    [row] = [line for line in DOC.splitlines() if line.startswith(f"| `{route}`")]
    return row


def sent_fields(model: type[BaseModel]) -> set[str]:
    """The keys a model puts on the wire (its excluded fields aside)."""
    return set(model.model_json_schema(mode="serialization")["properties"])


def test_the_start_inbox_and_audit_answers_list_their_models_fields() -> None:
    """POST /sessions' 201 (Started), GET /inbox's rows (InboxItem) and the audit's events (AuditEvent,
    and the `missing` placeholder of a whole read) each say every key they send, and no other."""
    assert set(KEYS.findall(route_row("POST /sessions"))) == sent_fields(Started)
    assert set(KEYS.findall(route_row("GET /inbox"))) == sent_fields(InboxItem)
    [audit] = [row for row in table_after("**Queries**") if row[0] == "`audit`"]
    assert set(KEYS.findall(audit[1])) == sent_fields(AuditEvent) | set(MissingItems.model_fields)
    kinds = audit[1].split("`event` one of ")[1].split(";")[0]
    assert set(names_in(kinds)) == set(get_args(AuditEventKind))


def test_the_input_keys_are_the_input_models() -> None:
    documented = {name for row in table_after("**Input**") for name in names_in(row[0])}
    assert documented == set(contract.START_INPUT.model_fields)


def app_routes() -> set[tuple[str, str]]:
    """Every route the API offers (its OpenAPI document: the web page's own `/` and files aside),
    with path parameters written as the page writes them."""
    paths = create_app(policy=None).openapi()["paths"]
    return {(method.upper(), path.replace("{session_id}", "{id}"))
            for path, operations in paths.items() for method in operations}


def test_the_http_routes_are_the_apps() -> None:
    documented = set(ROUTE.findall(DOC)) - {("GET", "/")}
    assert documented == app_routes()


def source_variables() -> set[str]:
    found: set[str] = set()
    for name in SOURCES:
        path = ROOT / name
        for file in [path] if path.is_file() else path.rglob("*.py"):
            found.update(VARIABLE.findall(file.read_text()))
    return found


def test_every_variable_the_code_reads_is_documented_and_no_other() -> None:
    assert set(VARIABLE.findall(DOC)) == source_variables()


def test_the_checks_read_what_they_should() -> None:
    """The readers find something: an empty table would make every comparison above vacuous."""
    assert len(table_after("**Input**")) > 15 and len(table_after("**Queries**")) >= 8
    assert ("POST", "/sessions") in app_routes() and "HITL_TASK_QUEUE" in source_variables()
    assert VARIABLE.findall("`TEMPORAL_TLS_*` and HITL_API_PORT, not HITL_") == ["TEMPORAL_TLS_*", "HITL_API_PORT"]
