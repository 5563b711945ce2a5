"""The web inbox in a real headless Chromium (Debian's chromium and chromium-driver, which
.ci/run installs): sign in with a token, see the pause and what a person needs to decide it
(who asked and whether that is verified, their message, why a person is needed, the deadline
as "in 23 h"), approve with an edited argument after seeing the diff, and see the tool's result
arrive through the live event stream without reloading the page.

The screenshots in docs/ (the README's) are taken by these tests every time they run, so they
show the page as it is; `git diff docs/*.png` after a run shows what changed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.api_server import Api, api, scripted_api, signing_key, token_of  # noqa: F401  (fixtures)
from tests.integration.test_sub_agents_api import delegating_api  # noqa: F401  (a fixture)
from tests.support.browser import NEEDS_CHROMIUM, approve_and_confirm, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)
from tests.support.sessions import eventually
from tests.support.fake_openai import FakeOpenAI, completion, text, tool_calls

DOCS = Path(__file__).resolve().parents[2] / "docs"
pytestmark = NEEDS_CHROMIUM


async def screenshot(browser: Any, name: str) -> None:
    """docs/<name>.png, of the page as it is now: the README shows these, so they never go stale."""
    assert await asyncio.to_thread(browser.save_screenshot, str(DOCS / name))


async def sign_in(browser: Any, api: Api, person: str) -> None:
    await asyncio.to_thread(browser.get, api.base + "/")
    [token_field] = await until(browser, find("#token"))
    await asyncio.to_thread(token_field.send_keys, token_of(person) + "\n")
    await until(browser, lambda b: b.find_element("id", "who").text == f"signed in as {person}")


async def test_before_signing_in_only_the_sign_in_form_shows(api: Api, browser: Any) -> None:
    await asyncio.to_thread(browser.get, api.base + "/")
    [form] = await until(browser, find("#sign-in"))
    assert form.is_displayed()
    [waiting] = find("#main")(browser)
    assert not waiting.is_displayed(), "an empty 'Waiting for you' card shows before anyone signed in"
    assert "Waiting for you" not in browser.find_element("tag name", "body").text


async def test_approve_with_an_edited_argument_and_see_the_result_arrive_live(api: Api, browser: Any) -> None:
    (api.agent.workspace / "draft.txt").write_text("an old draft\n")
    # ana's sessions, bob one of their participants: he may decide
    waiting = await api.start("ana", "book a flight to Beijing", participants=["bob"])  # stays in bob's inbox: a question
    started = await api.start("ana", "please delete notes.txt <b>not bold</b>", participants=["bob"])
    session, call = started["session_id"], started["pending"][0]["call_id"]

    await asyncio.to_thread(browser.get, api.base + "/")
    [token_field] = await until(browser, find("#token"))
    await asyncio.to_thread(token_field.send_keys, token_of("bob") + "\n")
    await until(browser, lambda b: b.find_element("id", "who").text == "signed in as bob")
    # The list is drawn after sign-in and redrawn every few seconds: read it whole each time, never [0].
    await until(browser, lambda b: "delete_file" in text_of(f'button.item[data-session="{session}"]')(b))
    await until(browser, find(f'button.item[data-session="{waiting["session_id"]}"]'))
    await until(browser, click(f'button.item[data-session="{session}"]'))

    card = f'.pending-item[data-call="{call}"]'
    [path] = await until(browser, find(f'{card} input[data-arg="path"]'))
    assert path.get_attribute("value") == "notes.txt"
    # The card says who asked, whether that is proven, and how long there is.
    assert text_of(f"{card} [data-role=asked-by]")(browser).startswith("ana")
    assert "verified" in text_of(f"{card} [data-role=asked-by]")(browser).lower()
    assert text_of(f"{card} [data-role=deadline]")(browser) == "in 23 h"
    row = text_of(f'button.item[data-session="{session}"]')(browser).lower()
    assert "asked by ana" in row and "verified" in row and "due in 23 h" in row, row
    await until(browser, lambda b: "live" in b.find_element("id", "stream-state").text)
    await asyncio.to_thread(browser.execute_script, "window.notReloaded = true")
    await asyncio.to_thread(path.clear)
    await asyncio.to_thread(path.send_keys, "draft.txt")
    # The edit shows as a diff against the model's arguments, and runs only once confirmed.
    diff = await until(browser, text_of(f"{card} [data-role=diff]"))
    assert 'path: "notes.txt" → "draft.txt"' in diff, diff
    # What approving does follows the edit: it no longer promises the model's notes.txt.
    assert text_of(f"{card} [data-role=approving]")(browser) == \
        "Approve with edits: runs delete_file with your edited arguments (above) now"
    await until(browser, click(f"{card} button.approve:not(.confirm-approval)"))
    [confirm] = await until(browser, lambda b: [e for e in find(f"{card} button.confirm-approval")(b) if e.is_displayed()])
    await screenshot(browser, "web-inbox.png")  # the pause, its edited argument and the diff, the live events
    assert (api.agent.workspace / "draft.txt").exists(), "an edited approval ran before it was confirmed"
    await asyncio.to_thread(confirm.click)

    [result] = await until(browser, lambda b: [e for e in find('#events li[data-type="tool_result"]')(b) if "draft.txt" in e.text])
    assert "Deleted" in result.text or "deleted" in result.text
    await until(browser, find('#events li[data-type="answer"]'))
    assert await asyncio.to_thread(browser.execute_script, "return window.notReloaded === true")
    assert not (api.agent.workspace / "draft.txt").exists()
    assert (api.agent.workspace / "notes.txt").exists()
    assert browser.find_elements("css selector", "b") == []  # the model's text stayed text

    await asyncio.to_thread(browser.find_element("id", "show-transcript").click)
    await until(browser, lambda b: "please delete notes.txt <b>not bold</b>" in b.find_element("id", "transcript").text)

    # The other session waits on a question: its answer box says what to type.
    await until(browser, click(f'button.item[data-session="{waiting["session_id"]}"]'))
    await until(browser, find(".pending-item.question input.free-answer"))
    assert "answer" in text_of(".pending-item.question .answer-label")(browser).lower()


async def test_the_card_shows_what_the_model_said_and_an_edit_as_a_diff(scripted_api: tuple[Api, FakeOpenAI], browser: Any) -> None:
    api, fake = scripted_api
    email = {"to": "ana@example.com", "subject": "lunch", "body": "See you at noon."}
    fake.script(completion({"role": "assistant", "content": "I will send Ana the lunch note now.", "tool_calls": [
        {"id": "e1", "type": "function", "function": {"name": "send_email", "arguments": json.dumps(email)}}]}),
        text("sent"))
    # Two hours: "in 1 h" however long a busy machine takes to show the card (up to an hour).
    session = (await api.start("ana", "tell ana lunch is at noon", approval_timeout_seconds=7200,
                               participants=["bob"]))["session_id"]
    await sign_in(browser, api, "bob")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    card = '.pending-item[data-call="e1"]'
    await until(browser, find(f"{card} [data-role=model-text]"))
    assert text_of(f"{card} [data-role=led-by]")(browser) == "tell ana lunch is at noon"
    assert text_of(f"{card} [data-role=model-text]")(browser) == "I will send Ana the lunch note now."
    assert text_of(f"{card} [data-role=description]")(browser), "the tool's description"
    assert text_of(f"{card} [data-role=because]")(browser), "why a person is needed"
    assert text_of(f"{card} [data-role=deadline]")(browser) == "in 1 h"
    assert find(f"{card} [data-role=remember]")(browser), "remembering is allowed here: the card offers it"
    [body] = find(f'{card} [data-arg="body"]')(browser)
    await asyncio.to_thread(body.clear)
    await asyncio.to_thread(body.send_keys, "See you at one.")
    diff = await until(browser, text_of(f"{card} [data-role=diff]"))
    assert 'body: "See you at noon." → "See you at one."' in diff and "subject" not in diff, diff
    await until(browser, click(f"{card} button.approve:not(.confirm-approval)"))
    [confirm] = await until(browser, lambda b: [e for e in find(f"{card} button.confirm-approval")(b) if e.is_displayed()])
    await screenshot(browser, "web-card.png")
    await asyncio.to_thread(confirm.click)
    await until(browser, lambda b: [e for e in find('#events li[data-type="pause_settled"]')(b) if "edited by bob" in e.text])
    async with api.as_("bob") as bob:
        audit = (await bob.get(f"/sessions/{session}/audit")).json()
    assert any(event["event"] == "edited" and event["by"] == "bob" for event in audit), audit


async def test_a_form_and_a_choice_are_answered_from_the_page(scripted_api: tuple[Api, FakeOpenAI], browser: Any) -> None:
    api, fake = scripted_api
    form = [{"name": "origin", "type": "string", "description": "departure city"},
            {"name": "class", "type": "enum", "choices": ["economy", "business"]},
            {"name": "bags", "type": "integer", "required": False},
            {"name": "date", "type": "date", "required": False}]
    fake.script(
        tool_calls(("q1", "ask_user_question", {"question": "Trip details?", "fields": form})),
        tool_calls(("q2", "ask_user_question", {"question": "Window or aisle?", "choices": ["window", "aisle"]})),
        text("booked"),
    )
    session = (await api.start("carol", "book a trip"))["session_id"]

    await asyncio.to_thread(browser.get, api.base + "/")
    [token_field] = await until(browser, find("#token"))
    await asyncio.to_thread(token_field.send_keys, token_of("carol") + "\n")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    [origin] = await until(browser, find('.pending-item[data-call="q1"] [data-field="origin"]'))
    # Each field says its type: a date is a date input, so "next friday" cannot be typed as one.
    types = [e.text for e in find('.pending-item[data-call="q1"] [data-role=field-type]')(browser)]
    assert types == ["string", "one of", "integer", "date"], types
    [when] = find('.pending-item[data-call="q1"] [data-field="date"]')(browser)
    # Typed as the session reads it, and as the field's own hint says (not the locale's mm/dd/yyyy).
    assert when.get_attribute("placeholder") == "YYYY-MM-DD" and when.get_attribute("type") == "text"
    await asyncio.to_thread(when.send_keys, "2026-12-24")
    assert await asyncio.to_thread(browser.execute_script, "return arguments[0].value", when) == "2026-12-24"
    await screenshot(browser, "web-form.png")
    await asyncio.to_thread(origin.send_keys, "Paris")
    [travel_class] = find('.pending-item[data-call="q1"] select[data-field="class"]')(browser)
    await asyncio.to_thread(travel_class.send_keys, "business")
    [bags] = find('.pending-item[data-call="q1"] [data-field="bags"]')(browser)
    await asyncio.to_thread(bags.send_keys, "2")
    await until(browser, click('.pending-item[data-call="q1"] button.answer'))

    await until(browser, click('.pending-item[data-call="q2"] button.choice[data-choice="aisle"]'))
    await until(browser, lambda b: [e for e in find('#events li[data-type="answer"]')(b) if "booked" in e.text])
    async with api.as_("carol") as carol:
        transcript = (await carol.get(f"/sessions/{session}/transcript")).json()
    results = [message["content"] for message in transcript if message["role"] == "tool"]
    assert '"origin": "Paris"' in results[0] and '"class": "business"' in results[0] and '"bags": 2' in results[0]
    assert '"date": "2026-12-24"' in results[0], results[0]
    assert "aisle" in results[1]


async def test_a_result_is_reviewed_and_replaced_from_the_page(api: Api, browser: Any) -> None:
    session = (await api.start("bob", "draft an email to bob@example.com about lunch saying see you at noon"))["session_id"]
    await asyncio.to_thread(browser.get, api.base + "/")
    [token_field] = await until(browser, find("#token"))
    await asyncio.to_thread(token_field.send_keys, token_of("bob") + "\n")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    [result] = await until(browser, find(".pending-item.review textarea.result"))
    assert "bob@example.com" in result.get_attribute("value")
    await asyncio.to_thread(result.clear)
    await asyncio.to_thread(result.send_keys, "Draft withheld: lunch moved to 1pm.")
    await until(browser, click(".pending-item.review button.approve"))
    await until(browser, lambda b: "edited by bob" in text_of('#events li[data-type="pause_settled"]')(b))
    await until(browser, find('#events li[data-type="answer"]'))
    async with api.as_("bob") as bob:
        transcript = (await bob.get(f"/sessions/{session}/transcript")).json()
    [reviewed] = [message["content"] for message in transcript if message["role"] == "tool"]
    assert "A person (bob) edited this result" in reviewed and "lunch moved to 1pm" in reviewed


async def test_after_ana_signs_out_bob_signing_in_on_the_same_page_sees_nothing_of_hers(api: Api, browser: Any) -> None:
    hers = await api.start("ana", "please delete notes.txt, the one about the anniversary")
    his = await api.start("bob", "please delete menu.txt")
    session = hers["session_id"]

    await sign_in(browser, api, "ana")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    await until(browser, find(f'.pending-item[data-call="{hers["pending"][0]["call_id"]}"]'))
    await until(browser, lambda b: "live" in b.find_element("id", "stream-state").text)
    await until(browser, find('#events li[data-type="pause_opened"]'))
    assert api.app.state.feeds.watched().get(session) == 1

    await until(browser, click("#sign-out"))
    await until(browser, find("#token"))
    # Her stream is closed (the server sees its listener go) and her token is gone from the tab.
    await eventually(lambda: asyncio.sleep(0, api.app.state.feeds.watched()), lambda watched: session not in watched)
    assert await asyncio.to_thread(browser.execute_script, "return sessionStorage.length") == 0
    assert session not in browser.page_source and "anniversary" not in browser.page_source

    await sign_in(browser, api, "bob")
    await until(browser, find(f'button.item[data-session="{his["session_id"]}"]'))
    page = browser.page_source  # the whole DOM, hidden parts too
    assert session not in page and "anniversary" not in page and "asked by ana" not in page
    assert find("#events li")(browser) == [] and find(".pending-item")(browser) == []
    assert await asyncio.to_thread(browser.execute_script, "return state.session") is None


async def test_the_card_says_what_approving_does_and_what_happens_at_the_deadline(api: Api, browser: Any) -> None:
    session = (await api.start("ana", "please delete notes.txt", participants=["bob"], approvers={"delete_file": ["bob"]},
                               escalate_after_seconds=3600, escalate_to=["carol"], remind_after_seconds=1800))["session_id"]
    await sign_in(browser, api, "bob")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    card = '.pending-item[data-call="call_1"]'
    await until(browser, find(f"{card} [data-role=approving]"))
    assert text_of(f"{card} [data-role=approving]")(browser) == "Approve: deletes notes.txt now"
    # The session's own rule at the deadline (workflows/pauses.py, unsettled_text), with the moment.
    at_deadline = text_of(f"{card} [data-role=at-deadline]")(browser)
    assert at_deadline.startswith("by ") and at_deadline.endswith(
        ": the call is cancelled and the agent is told; the tool does not run"), at_deadline
    assert "escalation contacts are told and may decide it too" in text_of(f"{card} [data-role=escalation]")(browser)
    assert "repeated while nobody decides" in text_of(f"{card} [data-role=reminder]")(browser)


@pytest.mark.parametrize("width", [420, 1280])
async def test_event_numbers_past_nine_show_whole_at_any_width(api: Api, browser: Any, width: int) -> None:
    await asyncio.to_thread(browser.set_window_size, width, 860)
    started = await api.start("bob", "please delete notes.txt")
    session, call = started["session_id"], started["pending"][0]["call_id"]
    async with api.as_("bob") as bob:  # three turns, each paused and rejected: a dozen events and more
        for name in ("menu.txt", "travel-policy.md"):
            (await bob.post(f"/sessions/{session}/calls/{call}/reject", json={"reason": "keep it"})).raise_for_status()
            turn = await bob.post(f"/sessions/{session}/messages", json={"text": f"please delete {name}", "wait": True})
            call = turn.raise_for_status().json()["pending"][0]["call_id"]
    await sign_in(browser, api, "bob")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    await until(browser, lambda b: len(find("#events li")(b)) >= 12)
    shown = await asyncio.to_thread(browser.execute_script, """
        const list = document.getElementById("events"), box = list.getBoundingClientRect();
        return { scroll: list.scrollWidth, client: list.clientWidth,
                 numbers: [...list.querySelectorAll("li")].map((li) => {
                   const number = li.querySelector(".event-id"), at = number ? number.getBoundingClientRect() : null;
                   return { id: li.dataset.id, text: number ? number.textContent : null,
                            inside: !!at && at.left >= box.left && at.right <= box.right && at.width > 0 };
                 }) };""")
    assert shown["scroll"] <= shown["client"], shown
    assert any(int(number["id"]) >= 10 for number in shown["numbers"]), shown
    assert all(number["text"] == number["id"] and number["inside"] for number in shown["numbers"]), shown


async def test_on_a_phone_the_card_is_one_column_with_large_targets(api: Api, browser: Any) -> None:
    """A phone's screen (390 x 844 CSS pixels, touch): the list and the card stacked, nothing wider
    than the screen, every button and field at least 44 px high and text fields at 16 px, which
    phones do not zoom into when focused."""
    await asyncio.to_thread(browser.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride",
                            {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    await asyncio.to_thread(browser.execute_cdp_cmd, "Emulation.setTouchEmulationEnabled", {"enabled": True})
    started = await api.start("ana", "please delete notes.txt", participants=["bob"])
    session, call = started["session_id"], started["pending"][0]["call_id"]
    await sign_in(browser, api, "bob")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    card = f'.pending-item[data-call="{call}"]'
    await until(browser, find(f"{card} button.approve"))
    shown = await asyncio.to_thread(browser.execute_script, """
        const box = (element) => element.getBoundingClientRect();
        const targets = [...document.querySelectorAll(
          "#detail button, #detail input:not([type=checkbox]):not([type=hidden]), #detail textarea, #detail select")]
          .filter((element) => element.offsetParent !== null);
        return { inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
                 list: box(document.getElementById("list")), detail: box(document.getElementById("detail")),
                 small: targets.filter((element) => box(element).height < 44).map((element) => element.outerHTML.slice(0, 80)),
                 fonts: targets.filter((element) => element.tagName !== "BUTTON")
                   .map((element) => parseFloat(getComputedStyle(element).fontSize)),
                 count: targets.length };""")
    assert shown["inner"] == 390, f"the page lays out wider than the phone's 390 px: {shown}"
    assert shown["scroll"] <= shown["inner"], f"the page is wider than the phone: {shown}"
    assert shown["detail"]["top"] >= shown["list"]["bottom"], f"the card is beside the list, not under it: {shown}"
    assert shown["count"] >= 3 and shown["small"] == [], shown
    assert shown["fonts"] and min(shown["fonts"]) >= 16, shown
    await screenshot(browser, "web-phone.png")


async def test_a_card_settled_elsewhere_says_by_whom_and_through_which_door(api: Api, browser: Any) -> None:
    """bob has the card open; carol approves it through another door (here the API): bob's page says
    who settled it and how, where the card was, and the events list says it too."""
    started = await api.start("ana", "please delete notes.txt", participants=["bob", "carol"],
                              approvers={"delete_file": ["bob", "carol"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    await sign_in(browser, api, "bob")
    await until(browser, click(f'button.item[data-session="{session}"]'))
    await until(browser, find(f'.pending-item[data-call="{call}"] button.approve'))
    await until(browser, lambda b: "live" in b.find_element("id", "stream-state").text)
    async with api.as_("carol") as carol:
        (await carol.post(f"/sessions/{session}/calls/{call}/approve", json={})).raise_for_status()
    said = await until(browser, lambda b: b.find_element("id", "decision-result").text or None)
    assert said == f"{call} approved by carol via api", said
    [settled] = await until(browser, find('#events li[data-type="pause_settled"]'))
    assert settled.find_element("css selector", ".text").text == f"{call} approved by carol via api"


async def test_a_sub_agents_call_is_decided_from_the_web_inbox_at_its_root(delegating_api: Api, browser: Any) -> None:
    """ana's session delegates to the janitor, whose deletion waits: bob's inbox row is at the root,
    its card says which agent asked and for whom, and his approval there runs the tool in the child."""
    from tests.integration.test_sub_agents import JANITOR

    api = delegating_api
    root = (await api.start("ana", "delegate janitor: delete notes.txt", agents={"janitor": JANITOR},
                            participants=["bob"]))["session_id"]
    await sign_in(browser, api, "bob")
    await until(browser, click(f'button.item[data-session="{root}"]'))
    card = f'.pending-item[data-call="{root}/janitor/1/call_1"]'
    await until(browser, find(f"{card} button.approve"))
    assert text_of(f"{card} [data-role=asked-by]")(browser).startswith("janitor, for ana"), \
        text_of(f"{card} [data-role=asked-by]")(browser)
    await approve_and_confirm(browser, card)  # delete_file is destructive

    async def deleted() -> bool:
        return not (api.agent.workspace / "notes.txt").exists()

    await eventually(deleted, bool)
    async with api.as_("ana") as ana:
        done = await eventually(lambda: ana.get(f"/sessions/{root}"), lambda answer: answer.json()["state"] == "idle")
    assert "Deleted notes.txt" in done.json()["last_answer"]
