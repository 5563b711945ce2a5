"""A property of the real API: whatever (person, action, session) is tried, the answer is what
docs/security.md's "Who may see and act on a session" says, restated here on its own (not read from
hitl/access.py) so the API is checked against the promise, not against itself.

The actions are ones that change nothing when allowed (a message or a cancel with a body the route
then refuses, 422; a decision with stale arguments, 409; a claim for too long, 422), so one set
of sessions serves every generated request. Run without a policy and with one (an operator, a
participant named by a group).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.testing import WorkflowEnvironment

from tests.support.api_server import Api, serving, signing_key, token_of  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent

PEOPLE = ["ana", "bob", "carol", "dave", "olga"]
# With a policy: olga is an operator, and the group @team (erin is nobody's token) names dave.
POLICY = {"operators": ["olga"], "groups": {"team": ["dave", "erin"]}}
READS = {"status": "", "pending": "/pending", "transcript": "/transcript", "audit": "/audit"}
ACTIONS = [*READS, "ticket", "message", "cancel", "approve", "reject", "claim"]
STALE = "0" * 64


@dataclass
class Session:
    """What the test knows of one session: the promise is stated over these facts."""

    id: str
    owner: str
    call: str
    operators: set[str]
    participants: set[str] = field(default_factory=set)  # as people: groups expanded
    open_call_approvers: set[str] | None = None  # None: no open call; empty: the call names none
    four_eyes: bool = False
    settled_call: bool = False  # its call was settled (so a decision on it is 409)

    def deciders(self) -> set[str]:
        if self.open_call_approvers is None:
            return set()
        return self.open_call_approvers or {self.owner, *self.participants, *self.operators}


def promised(person: str, action: str, session: Session) -> int:
    """The status docs/security.md promises."""
    members = {session.owner, *session.participants, *session.operators}
    readers = members | session.deciders()
    if person not in readers:
        return 404  # as for a session that does not exist
    if action in READS or action == "ticket":
        return 200
    if action in ("message", "cancel"):
        return 422 if person in members else 403  # 422: allowed, then the body is refused
    if session.settled_call:
        return 409
    if session.open_call_approvers is None:
        return 404
    if person not in session.deciders():
        return 403
    if action == "approve" and session.four_eyes and person == session.owner:
        return 403
    return 422 if action == "claim" else 409  # claim: too long; approve/reject: stale arguments


def request_for(action: str, session: Session) -> tuple[str, str, Any]:
    base = f"/sessions/{session.id}"
    if action in READS:
        return "GET", base + READS[action], None
    if action == "ticket":
        return "POST", base + "/events/ticket", None
    if action == "message":
        return "POST", base + "/messages", {"text": 5}
    if action == "cancel":
        return "POST", base + "/cancel", {"reason": 5}
    if action == "claim":
        return "POST", f"{base}/calls/{session.call}/claim", {"for_seconds": 999_999}
    return "POST", f"{base}/calls/{session.call}/{action}", {"expected_args_sha256": STALE}


async def sessions_of_every_kind(api: Api, operators: set[str], groups: dict[str, list[str]]) -> list[Session]:
    async def started(owner: str, message: str, **facts: Any) -> Session:
        options = {key: facts.pop(key) for key in ("approvers", "four_eyes", "participants") if key in facts}
        answer = await api.start(owner, message, **options)
        call = (answer["pending"] or [{"call_id": "call_1"}])[0]["call_id"]
        people = {person for name in options.get("participants", [])
                  for person in (groups.get(name[1:], []) if name.startswith("@") else [name])}
        return Session(id=answer["session_id"], owner=owner, call=call, operators=operators,
                       four_eyes=options.get("four_eyes", False), participants=people, **facts)

    sessions = [
        await started("ana", "please delete notes.txt", approvers={"delete_file": ["bob"]}, open_call_approvers={"bob"}),
        await started("bob", "please delete notes.txt", four_eyes=True, open_call_approvers=set()),
        await started("ana", "hello there"),
    ]
    closed = await started("carol", "please delete notes.txt", settled_call=True)
    async with api.as_("carol") as carol:
        assert (await carol.post(f"/sessions/{closed.id}/cancel", json={})).status_code == 200
        await eventually(lambda: carol.get(f"/sessions/{closed.id}"), lambda answer: answer.json()["state"] == "closed")
    sessions.append(closed)
    sessions.append(await started("carol", "please delete notes.txt", participants=["@team" if groups else "dave"],
                                  open_call_approvers=set()))
    return sessions


@pytest.fixture(params=["no policy", "a policy with an operator and a group"])
async def api_under(request: pytest.FixtureRequest, env: WorkflowEnvironment, workspace: Path, signing_key: str,
                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Api, dict[str, Any]]]:
    policy: dict[str, Any] = POLICY if request.param != "no policy" else {}
    if policy:
        (tmp_path / "policy.json").write_text(json.dumps(policy))
        monkeypatch.setenv("HITL_POLICY", str(tmp_path / "policy.json"))
    async for agent in running_agent(env.client, workspace):
        async with serving(agent, policy="from HITL_POLICY") as running:
            yield running, policy


async def test_every_answer_is_the_one_the_access_rules_promise(api_under: tuple[Api, dict[str, Any]]) -> None:
    api, policy = api_under
    sessions = await sessions_of_every_kind(api, set(policy.get("operators", [])), policy.get("groups", {}))
    clients = {person: httpx.Client(base_url=api.base, headers={"Authorization": f"Bearer {token_of(person)}"}, timeout=30)
               for person in PEOPLE}
    tried: list[tuple[str, str, str, int]] = []

    @settings(max_examples=200, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(person=st.sampled_from(PEOPLE), action=st.sampled_from(ACTIONS), session=st.sampled_from(sessions))
    def answers_as_promised(person: str, action: str, session: Session) -> None:
        method, path, body = request_for(action, session)
        answer = clients[person].request(method, path, json=body)
        tried.append((person, action, session.id, answer.status_code))
        assert answer.status_code == promised(person, action, session), (person, action, session, answer.text)
        if answer.status_code == 404 and person not in {session.owner, *session.participants, *session.operators,
                                                        *session.deciders()}:
            assert answer.json() == {"detail": f"unknown session {session.id!r}"}  # nothing told apart

    try:
        await asyncio.to_thread(answers_as_promised)
    finally:
        for client in clients.values():
            client.close()
    assert {status for *_, status in tried} >= {200, 403, 404, 409, 422}  # every kind of answer was met
    async with api.as_("ana") as ana:  # and nothing changed
        assert [item["call_id"] for item in (await ana.get(f"/sessions/{sessions[0].id}/pending")).json()] == [sessions[0].call]
    assert (api.agent.workspace / "notes.txt").exists()
