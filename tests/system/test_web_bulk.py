"""The web inbox decides many calls in one action (headless Chromium): filter, tick, confirm a
count, and each row then says decided or why not."""

from __future__ import annotations

import asyncio
from typing import Any

from selenium.webdriver.common.by import By

from tests.integration.test_bulk_decisions import (  # noqa: F401  (bulk_api: a fixture)
    BOBS, audit_of, bulk_api, dave_edits, forty_for_bob, inbox_of, proofs_in, start_many,
)
from tests.system.test_api_web import sign_in
from tests.support.api_server import Api, signing_key  # noqa: F401  (a fixture)
from tests.support.browser import NEEDS_CHROMIUM, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)
from tests.support.sessions import eventually

pytestmark = NEEDS_CHROMIUM


async def type_into(browser: Any, element_id: str, text: str) -> None:
    field = browser.find_element(By.ID, element_id)
    await asyncio.to_thread(field.send_keys, text)


async def test_forty_calls_approved_at_once_from_the_web_inbox(bulk_api: Api, browser: Any) -> None:
    api = bulk_api
    plain, two_of_three = await forty_for_bob(api)
    await eventually(lambda: inbox_of(api, "bob", "?tool=send_email"), lambda rows: len(rows) == 40)
    await sign_in(browser, api, "bob")
    await type_into(browser, "filter-tool", "send_email")
    await type_into(browser, "filter-arg", "subject=refund\n")
    await until(browser, lambda b: len(find("#items input.select")(b)) == 40)

    await until(browser, click("#select-all"))
    await until(browser, lambda b: b.find_element(By.ID, "approve-selected").text == "Approve selected (40)")
    await dave_edits(api, two_of_three)  # after the table was drawn
    await until(browser, click("#approve-selected"))
    asked = await until(browser, lambda b: text_of("#bulk-question")(b))
    assert asked == "Approve 40 calls?"
    await until(browser, click("#bulk-yes"))

    outcomes = await until(browser, lambda b: len(rows := find("#bulk-outcomes li")(b)) == 40 and [
        (row.get_attribute("data-session"), row.get_attribute("data-call"), row.get_attribute("data-outcome"), row.text)
        for row in rows])
    refused = [row for row in outcomes if row[2] == "refused"]
    assert [(session, call) for session, call, _, _ in refused] == [(two_of_three, "call_1_1")], refused
    assert "refused (conflict): stale decision" in refused[0][3], refused
    assert text_of("#bulk-summary")(browser) == "39 decided, 1 refused"
    for session_id in plain[:3]:  # each its own decision, by bob through the API, with its own proof
        decided = [event for event in await audit_of(api, "ana", session_id) if event["event"] == "approved"]
        assert sorted((event["call_id"], event["by"], event["via"]) for event in decided) == [
            ("call_1_1", "bob", "api"), ("call_1_2", "bob", "api")]
        assert len(await proofs_in(api, session_id)) == 2
    # What is left in bob's inbox is the changed call, with its new arguments, and nothing ticked.
    left = await until(browser, lambda b: len(rows := find("#items input.select")(b)) == 1 and rows)
    assert (left[0].get_attribute("data-session"), left[0].is_selected()) == (two_of_three, False)


async def test_rejecting_the_selection_needs_a_reason_and_a_yes(bulk_api: Api, browser: Any) -> None:
    api = bulk_api
    plain = await start_many(api, [("ana", {"approvers": BOBS})])
    await eventually(lambda: inbox_of(api, "bob", f"?session={plain[0]}"), lambda rows: len(rows) == 2)
    await sign_in(browser, api, "bob")
    await type_into(browser, "filter-session", plain[0] + "\n")
    await until(browser, lambda b: len(find("#items input.select")(b)) == 2)
    await until(browser, click('#items input.select[data-call="call_1_2"]'))
    await until(browser, click("#reject-selected"))
    assert await until(browser, lambda b: text_of("#bulk-summary")(b)) == "Say why you reject them (the model reads it)."
    await type_into(browser, "bulk-reason", "wrong customer")
    await until(browser, click("#reject-selected"))
    assert await until(browser, lambda b: text_of("#bulk-question")(b)) == "Reject 1 call?"
    await until(browser, click("#bulk-no"))  # nothing is sent
    assert len(await inbox_of(api, "bob", f"?session={plain[0]}")) == 2
    await until(browser, click("#reject-selected"))
    await until(browser, click("#bulk-yes"))
    await until(browser, lambda b: text_of("#bulk-summary")(b) == "1 decided, 0 refused")
    rejected = [event for event in await audit_of(api, "ana", plain[0]) if event["event"] == "rejected"]
    assert [(event["call_id"], event["by"], event["comment"]) for event in rejected] == [("call_1_2", "bob", "wrong customer")]
