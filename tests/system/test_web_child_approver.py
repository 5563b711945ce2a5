"""The web inbox, for a child's approver who may not read the root: ana's row for bob's sub-agent's
delete_file opens the root, shows her that call's card (and no other of bob's), and her approval
from the card counts (tests/integration/test_sub_agents_approver.py: the same story through the API)."""

from __future__ import annotations

from typing import Any

from tests.integration.test_sub_agents_approver import bobs_delegated_delete, policy_api  # noqa: F401  (a fixture)
from tests.system.test_api_web import sign_in
from tests.support.api_server import Api, signing_key  # noqa: F401  (a fixture)
from tests.support.browser import NEEDS_CHROMIUM, approve_and_confirm, browser, click, find, text_of, until  # noqa: F401  (browser: a fixture)
from tests.support.sessions import eventually

pytestmark = NEEDS_CHROMIUM


async def test_a_childs_approver_sees_and_approves_its_card_at_the_root(policy_api: Api, browser: Any) -> None:
    api = policy_api
    root, row = await bobs_delegated_delete(api)
    await sign_in(browser, api, "ana")
    await until(browser, click(f'button.item[data-session="{root}"]'))
    card = f'.pending-item[data-call="{row["call_id"]}"]'
    await until(browser, find(f"{card} button.approve"))
    assert len(find(".pending-item")(browser)) == 1
    await approve_and_confirm(browser, card)  # delete_file is destructive
    said = await until(browser, lambda b: (text := text_of("#decision-result")(b)).startswith("approve") and text)
    assert said == "approve: awaiting_more_approvals", said  # 1 of 2: carol's vote is still wanted
    async with api.as_("bob") as bob:
        audit = await eventually(lambda: bob.get(f"/sessions/{root}/audit"), lambda answer: any(
            event["event"] == "approved" for event in answer.json()))
    assert [(event["by"], event["via"], event["session_id"]) for event in audit.json()
            if event["event"] == "approved"] == [("ana", "api", f"{root}/janitor/1")]
