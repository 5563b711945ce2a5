"""`starter.py delegate`: hand one's decisions to a stand-in, list hand-overs, end one.

Through the HTTP API (HITL_API_URL, default http://127.0.0.1:8000) with the caller's bearer token
(HITL_API_TOKEN): a hand-over is the verified person's own, and the API seals it and checks the
operator's policy (docs/interface.md, "Stand-ins (delegation)"). The CLI's other commands speak to
Temporal directly and prove nobody, so they cannot hand anything over.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

DEFAULT_API = "http://127.0.0.1:8000"
PATH = "/people/me/delegations"


class DelegateError(Exception):
    """What went wrong, in one line (the API's reason where it gave one)."""


def api_of(environ: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    environ = dict(os.environ) if environ is None else environ
    token = environ.get("HITL_API_TOKEN", "").strip()
    if not token:
        raise DelegateError("HITL_API_TOKEN is not set: a hand-over is made through the API, as the token's person")
    return environ.get("HITL_API_URL", DEFAULT_API).rstrip("/"), {"Authorization": f"Bearer {token}"}


def answer_of(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise DelegateError(f"the API answered {response.status_code}: {detail}")
    return response.json()


def delegate(to: str | None, until: str | None, tools: list[str] | None, listing: bool, end: str | None,
             environ: dict[str, str] | None = None) -> str:
    """What to print: the hand-over made or ended, or the hand-overs given and received (JSON)."""
    base, headers = api_of(environ)
    with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
        try:
            if end is not None:
                return json.dumps(answer_of(http.delete(f"{PATH}/{end}")), indent=2)
            if listing:
                return json.dumps(answer_of(http.get(PATH)), indent=2)
            if to is None or until is None:
                raise DelegateError("say whom to hand over to and until when: delegate bob --until 2026-12-14T18:00:00Z")
            body: dict[str, Any] = {"to": to, "until": until, **({"tools": tools} if tools else {})}
            return json.dumps(answer_of(http.post(PATH, json=body)), indent=2)
        except httpx.HTTPError as error:
            raise DelegateError(f"cannot reach the API at {base}: {error}") from None
