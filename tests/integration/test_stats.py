"""How people decide, through the real doors: a scripted run of known decisions gives exact figures
at `GET /stats`, `starter.py stats` and `GET /metrics`; only operators (or the scrape token) read them."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from hitl.testing import scripted_model
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (fixtures)
from tests.support.sessions import eventually, running_agent

ROOT = Path(__file__).resolve().parents[2]
POLICY = {
    "operators": ["olga"],
    "tools": {"delete_file": {"approval": "always", "approvers": ["bob", "carol"]}},
    # Low, so that three quick approvals are a rubber stamp.
    "rubber_stamp": {"min_decisions": 3, "approve_rate": 0.9, "median_seconds": 60},
}
SCRIPT = [{"call": "delete_file", "args": {"path": "notes.txt"}}, {"say": "done"}]
SCRAPE_TOKEN = "scrape-token-0123456789abcdef"


@pytest.fixture
async def stats_api(env: WorkflowEnvironment, workspace: Path, signing_key: str, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """The API and a worker playing SCRIPT to every session, under POLICY, decision metrics refreshed on every scrape."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    monkeypatch.setenv("HITL_POLICY", str(path))
    monkeypatch.setenv("HITL_DECISION_METRICS_REFRESH", "0")
    monkeypatch.setenv("HITL_METRICS_TOKEN", SCRAPE_TOKEN)
    async for agent in running_agent(env.client, workspace, scripted_model(SCRIPT)):
        async with serving(agent, policy="from HITL_POLICY") as running:
            yield running


async def decide(api: Api, person: str, session: str, call: str, verb: str, body: dict[str, Any]) -> None:
    async with api.as_(person) as http:
        answer = await http.post(f"/sessions/{session}/calls/{call}/{verb}", json=body)
    assert answer.status_code == 200, answer.text


async def audit_events(api: Api, session: str) -> list[str]:
    async with api.as_("olga") as http:
        answer = await http.get(f"/sessions/{session}/audit")
    assert answer.status_code == 200, answer.text
    return [row["event"] for row in answer.json()]


async def known_decisions(api: Api) -> None:
    """Seven calls: bob approves three at once, carol rejects one and edits one, one times out, one waits."""
    started = [await api.start("ana", "tidy up the workspace") for _ in range(6)]
    calls = [(s["session_id"], s["pending"][0]["call_id"]) for s in started]
    for session, call in calls[:3]:
        await decide(api, "bob", session, call, "approve", {})
    await decide(api, "carol", *calls[3], "reject", {"reason": "keep it"})
    await decide(api, "carol", *calls[4], "approve", {"args": {"path": "other.txt"}})
    timing_out = (await api.start("ana", "tidy up the workspace", approval_timeout_seconds=1))["session_id"]
    await eventually(lambda: audit_events(api, timing_out), lambda events: "timed_out" in events, timeout=30)


async def stats_of(api: Api, person: str, query: str = "") -> Any:
    async with api.as_(person) as http:
        answer = await http.get(f"/stats{query}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def counts(figures: dict[str, Any]) -> tuple[int, int, int, int, int]:
    return (figures["requested"], figures["approved"], figures["edited"], figures["rejected"], figures["timed_out"])


async def starter_stats(api: Api, *args: str) -> Any:
    env = {**os.environ, "TEMPORAL_ADDRESS": api.agent.client.service_client.config.target_host,
           "HITL_TASK_QUEUE": api.agent.task_queue}
    process = await asyncio.create_subprocess_exec(
        # Its own task queue: the suite's other sessions share the dev server (the default is the namespace).
        sys.executable, str(ROOT / "starter.py"), "stats", "--task-queue", api.agent.task_queue, *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode(), err.decode()


async def test_a_scripted_run_of_known_decisions_gives_exact_figures_through_the_api_and_the_cli(stats_api: Api) -> None:
    api = stats_api
    await known_decisions(api)

    stats = await stats_of(api, "olga")
    assert counts(stats["total"]) == (7, 3, 1, 1, 1)
    assert list(stats["tools"]) == ["delete_file"] and counts(stats["tools"]["delete_file"]) == (7, 3, 1, 1, 1)
    assert {rule: counts(figures) for rule, figures in stats["rules"].items()} == {"tools.delete_file": (7, 3, 1, 1, 1)}
    assert {door: counts(figures) for door, figures in stats["doors"].items()} == {"api": (5, 3, 1, 1, 0)}
    bob, carol = stats["people"]["bob"], stats["people"]["carol"]
    assert (counts(bob), bob["rubber_stamp"]) == ((3, 3, 0, 0, 0), True)  # real audit rows: three quick approvals
    assert (counts(carol), carol["rubber_stamp"]) == ((2, 0, 1, 1, 0), False)
    assert 0 <= bob["decide_seconds_p50"] <= bob["decide_seconds_p95"] < 60
    assert stats["sessions"] == 7 and stats["complete"] is True and stats["unreadable"] == []

    only_carol = await stats_of(api, "olga", "?person=carol")
    assert counts(only_carol["total"]) == (2, 0, 1, 1, 0) and list(only_carol["people"]) == ["carol"]
    nothing_yet = await stats_of(api, "olga", "?since=2020-01-01T00:00:00Z&until=2020-02-01T00:00:00Z")
    assert counts(nothing_yet["total"]) == (0, 0, 0, 0, 0) and nothing_yet["sessions"] == 0

    code, out, err = await starter_stats(api, "--json")
    assert code == 0, err
    assert counts(json.loads(out)["total"]) == (7, 3, 1, 1, 1)
    assert json.loads(out)["people"]["bob"]["rubber_stamp"] is True
    code, out, err = await starter_stats(api)
    assert code == 0, err
    person_rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("bob ", "carol "))}
    assert person_rows["bob"][1:6] == ["3", "3", "0", "0", "0"] and person_rows["bob"][-1] == "yes"
    assert person_rows["carol"][1:6] == ["2", "0", "1", "1", "0"] and person_rows["carol"][-1] != "yes"
    code, out, err = await starter_stats(api, "--since", "yesterday")
    assert code == 2 and err.strip() == ("error: since: not an ISO 8601 time ('yesterday'); e.g. 2026-03-01T00:00:00Z")


async def test_only_operators_read_the_stats_and_a_bad_period_is_one_clear_line(stats_api: Api) -> None:
    api = stats_api
    async with api.as_("bob") as bob, api.as_("olga") as olga, api.as_(None) as nobody:
        refused = await bob.get("/stats")
        assert refused.status_code == 403 and "not an operator" in refused.json()["detail"], refused.text
        assert (await bob.get("/metrics")).status_code == 403
        assert (await nobody.get("/stats")).status_code == 401
        assert (await nobody.get("/metrics")).status_code == 401
        bad = await olga.get("/stats?since=last+week")
        assert bad.status_code == 422 and bad.json()["detail"].startswith("since: not an ISO 8601 time"), bad.text
        backwards = await olga.get("/stats?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z")
        assert backwards.status_code == 422 and backwards.json()["detail"] == "since: must be before until"


def series(text: str, name: str) -> dict[str, float]:
    """The samples of one series in Prometheus' text format, by their labels in alphabetical order."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name):].rpartition(" ")
            found["{" + ",".join(sorted(labels.strip("{}").split(","))) + "}"] = float(value)
    return found


async def test_the_metrics_count_each_decision_once_by_tool_rule_door_person_and_outcome(stats_api: Api) -> None:
    api = stats_api
    await known_decisions(api)

    async def scrape() -> str:
        async with api.as_(None, {"Authorization": f"Bearer {SCRAPE_TOKEN}"}) as prometheus:
            answer = await prometheus.get("/metrics")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        return answer.text

    # Decisions are counted a few seconds after they are made: scrape until all seven are in.
    text = await eventually(scrape, lambda text: sum(series(text, "hitl_decisions_total").values()) == 6
                            and sum(series(text, "hitl_decision_requests_total").values()) == 7, timeout=30, every=0.5)
    decisions = series(text, "hitl_decisions_total")
    assert decisions['{door="api",outcome="approved",person="bob",rule="tools.delete_file",tool="delete_file"}'] == 3
    assert decisions['{door="api",outcome="rejected",person="carol",rule="tools.delete_file",tool="delete_file"}'] == 1
    assert decisions['{door="api",outcome="edited",person="carol",rule="tools.delete_file",tool="delete_file"}'] == 1
    assert decisions['{door="",outcome="timed_out",person="",rule="tools.delete_file",tool="delete_file"}'] == 1
    assert series(text, "hitl_decide_seconds_count")['{door="api",person="bob",rule="tools.delete_file",tool="delete_file"}'] == 3
    again = await scrape()  # counted once: a later refresh adds nothing that was counted
    assert series(again, "hitl_decisions_total") == decisions
    async with api.as_("olga") as olga:  # an operator may read them too
        assert (await olga.get("/metrics")).status_code == 200
