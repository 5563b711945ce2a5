"""`GET /stats` and `GET /metrics`: how people decide, for operators (docs/interface.md, "Decisions at scale").

Both read the audits of the sessions on this API's task queue (hitl/client/decisions.py):
`/stats` over a period, as one JSON answer; `/metrics` as Prometheus series counted since the
API started (hitl/api/decision_metrics.py). Only the policy's operators read them, or for
`/metrics` whoever sends the scrape token `HITL_METRICS_TOKEN` (a Prometheus server, which
should not hold an operator's token: that token reads and steers every session).
"""

from __future__ import annotations

import hmac
import os

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from hitl.access import is_operator
from hitl.api.auth import TokenFileError, bearer_token, caller, identity
from hitl.api.decision_metrics import DecisionMetrics
from hitl.api.gateway import temporal
from hitl.api.guard import policy_as_written, policy_of
from hitl.client.decisions import PeriodError, StatsRead, period, stats_between
from workflows.policy import OperatorPolicy

router = APIRouter(tags=["stats"])
METRICS_TOKEN = "HITL_METRICS_TOKEN"
SHORTEST_SCRAPE_TOKEN = 16  # as people's tokens: it reads every decider's figures


def scrape_token_from_env() -> str | None:
    """HITL_METRICS_TOKEN, read once at start; one too short to resist guessing stops the API."""
    token = os.environ.get(METRICS_TOKEN, "").strip()
    if token and len(token) < SHORTEST_SCRAPE_TOKEN:
        raise TokenFileError(f"{METRICS_TOKEN} is shorter than {SHORTEST_SCRAPE_TOKEN} characters; "
                             "use e.g. `openssl rand -hex 24`")
    return token or None


def operator_only(request: Request, person: str) -> None:
    if not is_operator(person, policy_of(request)):
        raise HTTPException(403, f"{person} is not an operator: only the policy's operators read how people decide")


@router.get("/stats", response_model=StatsRead)
async def stats(
    request: Request,
    since: str | None = Query(None, description="ISO 8601; default: a week before `until`"),
    until: str | None = Query(None, description="ISO 8601; default: now"),
    tool: str | None = Query(None, max_length=200),
    person: str | None = Query(None, max_length=200),
    asker: str = Depends(caller),
) -> StatsRead:
    """Per tool, policy rule, door and person over [since, until): requested, approved, edited,
    rejected, timed_out, decide_seconds_p50 and _p95, and `rubber_stamp` per person. Operators only."""
    operator_only(request, asker)
    try:
        start, end = period(since, until)
    except PeriodError as error:
        raise HTTPException(422, str(error)) from None
    gateway = temporal(request)
    client = await gateway.get()
    policy = policy_as_written(request)
    async with request.app.state.reads.slot(asker):
        return await stats_between(client, start, end, policy=policy if isinstance(policy, OperatorPolicy) else None,
                                   tool=tool, person=person, task_queue=await gateway.queue())


def decision_metrics(request: Request) -> DecisionMetrics:
    metrics: DecisionMetrics = request.app.state.decision_metrics
    return metrics


async def may_scrape(request: Request, authorization: str | None = Header(default=None)) -> None:
    """The scrape token, else an operator's credentials (401 or 403 otherwise)."""
    expected: str | None = request.app.state.scrape_token
    sent = bearer_token(authorization)
    if expected and sent is not None and hmac.compare_digest(sent.encode(), expected.encode()):
        return
    who = await identity(request, authorization)
    operator_only(request, who.person)


@router.get("/metrics", dependencies=[Depends(may_scrape)], response_class=Response)
async def metrics(request: Request) -> Response:
    """Decisions as Prometheus counters and histograms (text format); operators or HITL_METRICS_TOKEN."""
    gateway = temporal(request)
    policy = policy_as_written(request)
    body = await decision_metrics(request).exposition(
        await gateway.get(), await gateway.queue(), policy if isinstance(policy, OperatorPolicy) else None)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
