"""`GET /inbox` shows each person only what they may decide; a claim keeps others off an item."""

from __future__ import annotations

from typing import Any

from tests.support.api_server import Api, api, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually


async def inbox_of(api: Api, person: str, query: str = "") -> list[dict[str, Any]]:
    async with api.as_(person) as http:
        answer = await http.get(f"/inbox{query}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def sessions_in(items: list[dict[str, Any]]) -> set[str]:
    return {item["session_id"] for item in items}


async def test_each_person_sees_only_what_they_may_decide(api: Api) -> None:
    only_bob = (await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]}))["session_id"]
    carols_own = (await api.start("carol", "please delete notes.txt"))["session_id"]  # no approvers: its owner's
    four_eyes = (await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["ana", "carol"]},
                                 four_eyes=True))["session_id"]

    carol = await eventually(lambda: inbox_of(api, "carol"), lambda items: sessions_in(items) == {carols_own, four_eyes})
    assert [item["requested_at"] for item in carol] == sorted(item["requested_at"] for item in carol)  # oldest first
    assert {item["tool"] for item in carol} == {"delete_file"}
    assert sessions_in(await inbox_of(api, "bob")) == {only_bob}  # not carol's own, not where others approve
    assert sessions_in(await inbox_of(api, "ana")) == set()  # not bob's, not her own request under four eyes
    assert sessions_in(await inbox_of(api, "dave")) == set()


async def test_a_claim_keeps_others_decisions_out_until_it_is_released(api: Api) -> None:
    started = await api.start("ana", "please delete notes.txt", approvers={"delete_file": ["bob", "carol"]})
    session, call = started["session_id"], started["pending"][0]["call_id"]
    url = f"/sessions/{session}/calls/{call}"
    async with api.as_("bob") as bob, api.as_("carol") as carol:
        claimed = await bob.post(f"{url}/claim", json={"for_seconds": 600, "by": "carol"})
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["claimed_by"] == "bob"

        refused = await carol.post(f"{url}/approve", json={})
        assert refused.status_code == 409, refused.text
        assert "claimed by bob" in refused.json()["detail"]
        assert (await carol.post(f"{url}/release")).status_code == 409  # only the claimant releases

        # The item stays in carol's inbox, marked: who holds it and until when.
        marked = await eventually(lambda: inbox_of(api, "carol"),
                                  lambda items: any(i["call_id"] == call and i["claimed_by"] == "bob" for i in items))
        assert [i["claim_until"] for i in marked if i["call_id"] == call][0]

        released = await bob.post(f"{url}/release")
        assert released.status_code == 200, released.text
        approved = await carol.post(f"{url}/approve", json={})
        assert approved.status_code == 200, approved.text
