"""The web inbox's page for operators, in a real headless Chromium: signed in on the inbox, an
operator opens "How people decide" and reads the figures of known decisions, the rubber stamp
marked; anyone else is told why not."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.integration.test_stats import known_decisions, stats_api  # noqa: F401  (a fixture)
from tests.support.api_server import Api, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.browser import NEEDS_CHROMIUM, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)

pytestmark = NEEDS_CHROMIUM


async def signed_in_on_the_stats_page(browser: Any, api: Api, person: str) -> None:
    await asyncio.to_thread(browser.get, api.base + "/")
    [token_field] = await until(browser, find("#token"))
    await asyncio.to_thread(token_field.send_keys, token_of(person) + "\n")
    await until(browser, lambda b: b.find_element("id", "who").text == f"signed in as {person}")
    await until(browser, click("#stats-link"))
    await until(browser, lambda b: b.find_element("id", "who").text == f"signed in as {person}")


def person_row(name: str) -> Any:
    def probe(browser: Any) -> list[str] | None:
        for row in find('table[data-section="person"] tbody tr')(browser):
            cells = [cell.text for cell in row.find_elements("css selector", "td")]
            if cells and cells[0] == name:
                return cells
        return None
    return probe


async def test_an_operator_reads_how_people_decide_and_sees_the_rubber_stamp(stats_api: Api, browser: Any) -> None:
    api = stats_api
    await known_decisions(api)
    await signed_in_on_the_stats_page(browser, api, "olga")
    bob = await until(browser, person_row("bob"))
    assert bob[1:6] == ["3", "3", "0", "0", "0"] and bob[-1] == "RUBBER STAMP"
    carol = await until(browser, person_row("carol"))
    assert carol[1:6] == ["2", "0", "1", "1", "0"] and carol[-1] == ""
    assert "7" in text_of('table[data-section="tool"] tbody tr')(browser).split()
    assert "from 7 sessions" in text_of("#summary")(browser)


async def test_someone_who_is_not_an_operator_is_told_why_not(stats_api: Api, browser: Any) -> None:
    await signed_in_on_the_stats_page(browser, stats_api, "bob")
    await until(browser, lambda b: "not an operator" in text_of("#stats-error")(b))
    assert find("table")(browser) == []
