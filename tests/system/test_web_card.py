"""The web card's buttons and fields, in a real headless Chromium: Claim only when nobody holds the
call (the holder's name when someone else does), Release only to the holder; on a phone, opening a
card scrolls to it; every field's hint fits the field; Approve takes a comment; a destructive call,
like an edited one, is approved only once confirmed."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.browser import NEEDS_CHROMIUM, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)
from tests.support.sessions import eventually
from tests.system.test_api_web import sign_in

pytestmark = NEEDS_CHROMIUM

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}


def shown(selector: str) -> Any:
    """The displayed elements `selector` finds (a card keeps hidden rows, e.g. a confirmation)."""
    return lambda browser: [element for element in find(selector)(browser) if element.is_displayed()]


async def open_card(browser: Any, api: Api, person: str, session: str, call: str) -> str:
    await sign_in(browser, api, person)
    await until(browser, click(f'button.item[data-session="{session}"]'))
    card = f'.pending-item[data-call="{call}"]'
    await until(browser, find(f"{card} button.approve"))
    return card


async def test_claim_shows_only_when_nobody_holds_the_call_and_release_only_to_its_holder(api: Api, browser: Any) -> None:
    started = await api.start("ana", "please delete notes.txt", participants=["bob", "carol"],
                              approvers={"delete_file": ["bob", "carol"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    card = await open_card(browser, api, "bob", session, call)
    assert shown(f"{card} .claim-button")(browser) and not shown(f"{card} .release-button")(browser), \
        "an unclaimed call offers Claim, and nothing to release"

    await until(browser, click(f"{card} .claim-button"))
    await until(browser, shown(f"{card} .release-button"))
    assert not shown(f"{card} .claim-button")(browser), "bob holds it: Claim again is no use to him"
    assert text_of(f"{card} [data-role=claim]")(browser).startswith("claimed by you until"), \
        text_of(f"{card} [data-role=claim]")(browser)

    await until(browser, click("#sign-out"))
    await open_card(browser, api, "carol", session, call)
    holder = await until(browser, text_of(f"{card} [data-role=claim]"))
    assert holder.startswith("claimed by bob until"), holder
    assert not shown(f"{card} .claim-button")(browser) and not shown(f"{card} .release-button")(browser), \
        "bob's claim stands: carol can neither take it nor give it back"


async def test_on_a_phone_opening_a_card_scrolls_it_into_view(api: Api, browser: Any) -> None:
    await asyncio.to_thread(browser.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride", PHONE)
    sessions = [(await api.start("bob", f"please delete notes-{n}.txt"))["session_id"] for n in range(8)]
    await sign_in(browser, api, "bob")
    await until(browser, lambda b: len(find("button.item")(b)) == len(sessions))
    list_bottom = await asyncio.to_thread(browser.execute_script,
                                          "return document.getElementById('list').getBoundingClientRect().bottom")
    assert list_bottom > PHONE["height"], f"the list fits the screen ({list_bottom} px): nothing to scroll past"
    await until(browser, click(f'button.item[data-session="{sessions[0]}"]'))
    await until(browser, find(".pending-item button.approve"))

    def card_top(browser: Any) -> Any:
        return browser.execute_script("return document.getElementById('detail').getBoundingClientRect().top")

    # Its top in the upper half of the screen, not below the list.
    await until(browser, lambda b: 0 <= card_top(b) < PHONE["height"] / 2, timeout=10)


async def test_every_fields_hint_fits_its_field_on_a_phone(api: Api, browser: Any) -> None:
    """A hint cut short ("reason (the m") says nothing: what a field is for is a label above it, or a
    placeholder short enough to show whole."""
    await asyncio.to_thread(browser.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride", PHONE)
    approval = await api.start("ana", "please delete notes.txt", participants=["bob"])
    question = await api.start("ana", "book a flight to Beijing", participants=["bob"])
    await sign_in(browser, api, "bob")
    for started in (approval, question):
        await until(browser, click(f'button.item[data-session="{started["session_id"]}"]'))
        await until(browser, find(f'.pending-item[data-call="{started["pending"][0]["call_id"]}"] button.reject'))
        cut = await asyncio.to_thread(browser.execute_script, """
            const pen = document.createElement("canvas").getContext("2d");
            return [...document.querySelectorAll("#detail input[placeholder], #detail textarea[placeholder]")]
              .filter((field) => field.offsetParent !== null && field.placeholder)
              .filter((field) => {
                const style = getComputedStyle(field);
                pen.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
                const room = field.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
                return pen.measureText(field.placeholder).width > room;
              }).map((field) => field.placeholder);""")
        assert cut == [], f"hints cut short on a phone: {cut}"
    # Read once the card stands (the inbox's timer may be redrawing it): what the answer is for, said whole.
    await until(browser, lambda b: "the agent" in text_of(".pending-item .answer-label")(b))


async def test_approve_takes_a_comment_which_the_audit_keeps(api: Api, browser: Any) -> None:
    started = await api.start("ana", "please delete notes.txt", participants=["bob"])
    session, call = started["session_id"], started["pending"][0]["call_id"]
    card = await open_card(browser, api, "bob", session, call)
    [comment] = await until(browser, shown(f"{card} input[data-role=comment]"))
    await asyncio.to_thread(comment.send_keys, "old notes, agreed with ana")
    await until(browser, click(f"{card} button.approve:not(.confirm-approval)"))
    await until(browser, click(f"{card} button.confirm-approval"))
    async with api.as_("ana") as ana:
        audit = await eventually(lambda: ana.get(f"/sessions/{session}/audit"),
                                 lambda answer: any(event["event"] == "approved" for event in answer.json()))
    [approved] = [event for event in audit.json() if event["event"] == "approved"]
    assert (approved["by"], approved["comment"]) == ("bob", "old notes, agreed with ana"), approved


async def test_a_destructive_call_is_approved_only_once_confirmed(api: Api, browser: Any) -> None:
    """delete_file is destructive (its catalog entry says so): one click on Approve asks, as an
    edited approval does; the confirmation runs it."""
    started = await api.start("ana", "please delete notes.txt", participants=["bob"])
    session, call = started["session_id"], started["pending"][0]["call_id"]
    card = await open_card(browser, api, "bob", session, call)
    await until(browser, click(f"{card} button.approve:not(.confirm-approval)"))
    [confirm] = await until(browser, shown(f"{card} button.confirm-approval"))
    assert "destructive" in text_of(f"{card} .row.confirm")(browser).lower()
    async with api.as_("ana") as ana:
        assert [item["call_id"] for item in (await ana.get(f"/sessions/{session}/pending")).json()] == [call]
    assert (api.agent.workspace / "notes.txt").exists(), "one click ran a destructive call"
    await asyncio.to_thread(confirm.click)

    async def deleted() -> bool:
        return not (api.agent.workspace / "notes.txt").exists()

    await eventually(deleted, bool)


async def test_a_claim_that_has_ended_offers_claim_again_without_a_reload(api: Api, browser: Any) -> None:
    """carol's claim of a few seconds ends while bob looks at the card: the card offers him Claim
    again by itself (a claim past its time holds nothing)."""
    started = await api.start("ana", "please delete notes.txt", participants=["bob", "carol"],
                              approvers={"delete_file": ["bob", "carol"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("carol") as carol:
        claimed = await carol.post(f"/sessions/{session}/calls/{call}/claim", json={"for_seconds": 3})
    assert claimed.status_code == 200, claimed.text
    card = await open_card(browser, api, "bob", session, call)
    await asyncio.to_thread(browser.execute_script, "window.notReloaded = true")
    # Seen held, unless this machine took the claim's three seconds to draw the card.
    if not shown(f"{card} .claim-button")(browser):
        assert text_of(f"{card} [data-role=claim]")(browser).startswith("claimed by carol until")
    await until(browser, shown(f"{card} .claim-button"))
    assert not find(f"{card} [data-role=claim]")(browser)
    assert await asyncio.to_thread(browser.execute_script, "return window.notReloaded === true")
