"""`starter.py inbox --tool T [--arg k=v] ... --approve-all | --reject-all --reason R`.

The table and the decisions both go through the HTTP API (HITL_API_URL, the
person's HITL_API_TOKEN): the table is `GET /inbox` with the filters, what the
person may decide as the API sees it, and the decisions are one `POST /decisions`
naming each row with the arguments' digest the table showed, so every call is
its own signed decision and one whose arguments changed since is refused.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from typing import Any, Callable

import httpx

from hitl.client.inbox import Inbox, InboxItem
from hitl.client.inbox_filters import FilterError, argument_pair
from hitl.console.inbox import plural, render_inbox
from hitl.console.render import say

NO_API = ("bulk decisions go through the HTTP API, which signs each one for you: set HITL_API_URL "
          "(or --api) and HITL_API_TOKEN")
TIMEOUT_SECONDS = 300.0


class BulkError(Exception):
    """Why the command stopped before deciding anything, in one line."""


def filter_params(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The command's filters as `GET /inbox`'s query parameters."""
    params = [(name, value) for name, value in (("tool", args.tool), ("requested_by", args.requested_by),
                                                 ("older_than", args.older_than), ("session", args.filter_session))
              if value]
    return params + [(f"arg.{name}", value) for name, value in (argument_pair(pair) for pair in args.arg or [])]


def rows_of(decisions: list[dict[str, Any]], verb: str, reason: str | None) -> dict[str, Any]:
    return {"decisions": [{"session_id": item["session_id"], "call_id": item["call_id"],
                           "args_sha256": item["args_sha256"], "decision": verb,
                           **({"reason": reason} if reason and verb == "reject" else {})} for item in decisions]}


def outcome_line(answer: dict[str, Any]) -> str:
    if answer["outcome"] == "decided":
        return f"decided  {answer['session_id']}  {answer['call_id']}"
    return f"refused  {answer['session_id']}  {answer['call_id']}  {answer.get('code') or ''}: {answer.get('reason') or ''}"


async def decide_all(args: argparse.Namespace, ask: Callable[[str], str] = input) -> int:
    """Show the table, ask, decide; 0 when every row was decided, 2 when any was refused, 1 when
    nothing could be asked or decided."""
    verb = "approve" if args.approve_all else "reject"
    if verb == "reject" and not args.reason:
        say("error: --reject-all needs --reason (the model reads it)", file=sys.stderr)
        return 1
    base, token = args.api or os.environ.get("HITL_API_URL"), os.environ.get("HITL_API_TOKEN")
    if not base or not token:
        say(f"error: {NO_API}", file=sys.stderr)
        return 1
    try:
        async with httpx.AsyncClient(base_url=base.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
                                     timeout=TIMEOUT_SECONDS) as http:
            items = await table(http, filter_params(args))
            say(render_inbox(inbox_of(items)))
            if not items:
                return 0
            if not args.yes and ask(f"{verb} {plural(len(items), 'call')}? [y/N] ").strip().lower() not in ("y", "yes"):
                say("nothing decided")
                return 1
            answers = await answered(http, rows_of(items, verb, args.reason))
    except (BulkError, FilterError) as error:
        say(f"error: {error}", file=sys.stderr)
        return 1
    except httpx.HTTPError as error:
        say(f"error: the API at {base} did not answer: {error}", file=sys.stderr)
        return 1
    for answer in answers:
        say(outcome_line(answer))
    refused = sum(answer["outcome"] != "decided" for answer in answers)
    say(f"{len(answers) - refused} decided, {refused} refused")
    return 2 if refused else 0


async def table(http: httpx.AsyncClient, params: list[tuple[str, str]]) -> list[dict[str, Any]]:
    answer = await http.get("/inbox", params=tuple(params))
    if answer.status_code != 200:
        raise BulkError(f"GET /inbox answered {answer.status_code}: {detail_of(answer)}")
    rows: list[dict[str, Any]] = answer.json()
    return rows


async def answered(http: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    answer = await http.post("/decisions", json=body)
    if answer.status_code != 200:
        raise BulkError(f"POST /decisions answered {answer.status_code}: {detail_of(answer)}")
    rows: list[dict[str, Any]] = answer.json()
    return rows


def detail_of(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("detail"))
    except ValueError:
        return answer.text[:200]


def inbox_of(rows: list[dict[str, Any]]) -> Inbox:
    items = [InboxItem.model_validate(row) for row in rows]
    return Inbox(items=items, waiting_sessions=len({item.session_id for item in items}),
                 sessions=len({item.session_id for item in items}), complete=True, read_at=datetime.now(timezone.utc))
