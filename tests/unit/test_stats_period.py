"""`GET /stats` with a period at the ends of the calendar: a clear 422 naming the bound, never a
500, and nothing asked of Temporal (the API here has none behind it)."""

from __future__ import annotations

from typing import AsyncIterator

import pytest
from temporalio.client import Client

from hitl.devserver import free_port
from tests.support.api_server import Api, serving
from workflows.policy import parse_policy

pytestmark = pytest.mark.unit


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    nowhere = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True)  # nothing listens there
    async with serving(None, client=nowhere, task_queue="nowhere",
                       policy=parse_policy('{"operators": ["olga"]}')) as running:
        yield running


@pytest.mark.parametrize("query", [
    "until=0001-01-02",  # a week before it is before the calendar
    "since=0001-01-01T00:00:00%2B05:00&until=0001-01-03",  # before the calendar once in UTC
    "since=9999-12-30&until=9999-12-31T23:00:00-05:00",  # after it once in UTC
    "since=0999-01-01&until=0999-01-03",  # a year a visibility query cannot name
    "since=2016-01-01",  # ten years back: longer than a period may be
])
async def test_a_period_off_the_calendar_is_a_one_line_422(api: Api, query: str) -> None:
    async with api.as_("olga") as http:
        answer = await http.get(f"/stats?{query}")
    assert answer.status_code == 422, (query, answer.status_code, answer.text)
    detail = answer.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and detail.startswith(("since:", "until:")), detail
