"""Who is calling: bearer tokens mapped to people, and short-lived stream tickets.

`HITL_API_TOKENS` names a JSON file `{"<token>": "<person>"}`. Every route but
the codec's, `/healthz` and the web page's static files needs
`Authorization: Bearer <token>`; the person the token names is the `by` of
everything the caller decides (a `by` in a body is ignored). With an OpenID
provider configured, its access tokens are accepted beside the file's
(hitl/api/oidc.py). The provider may not name a person of the file by spelling:
with sign-in by email only a verified address can arrive from it (a file person
named by that address is the same person, as the operator wrote it); with any
other claim a provider name the file also holds is refused.

A browser's EventSource cannot send headers, and a bearer token in a URL ends
up in logs and history. So the page first POSTs (with its bearer token) for a
stream ticket: an HMAC over (person, session, expiry) that opens one session's
event stream once, within a minute, and is worthless anywhere else. A ticket
rides in the URL, so the access log is given paths without their query
(`QuerylessAccessLog`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fastapi import Depends, Header, HTTPException, Request

from hitl.api.followed import Followed, now
from hitl.api.oidc import Identity, OpenIDProvider, ProviderUnavailable, TokenRefused, looks_like_jwt
from hitl.api.state import ApiState
from hitl.api.state.memory import MemoryState

TICKET_SECONDS = 60


class TokenFileError(ValueError):
    """HITL_API_TOKENS names a file that cannot be read as {"token": "person"}."""


@dataclass(frozen=True)
class TokenBook:
    """Tokens to people; `source` says where they came from, for messages."""

    people: dict[str, str]
    source: str

    @classmethod
    def from_env(cls) -> Followed[TokenBook] | TokenBook:
        """The file HITL_API_TOKENS names, followed: a token taken out of it stops working at once."""
        path = os.environ.get("HITL_API_TOKENS")
        return Followed.read(Path(path), cls.load) if path else cls({}, "HITL_API_TOKENS is not set")

    @classmethod
    def load(cls, path: Path) -> TokenBook:
        """Read and check the file at start, so a broken one stops the server with the reason."""
        try:
            data = json.loads(path.read_text())
        except OSError as error:
            raise TokenFileError(f"HITL_API_TOKENS={path}: cannot read it: {error.strerror or error}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise TokenFileError(f"HITL_API_TOKENS={path}: not JSON: {error}") from None
        if not isinstance(data, dict):
            raise TokenFileError(f'HITL_API_TOKENS={path}: must be a JSON object {{"<token>": "<person>"}}')
        for token, person in data.items():
            if not isinstance(person, str) or not person.strip():
                raise TokenFileError(f"HITL_API_TOKENS={path}: the person of token {token[:4]}… must be a non-empty string")
            if len(token) < 16:
                raise TokenFileError(f"HITL_API_TOKENS={path}: token {token[:4]}… is shorter than 16 characters; use e.g. `openssl rand -hex 24`")
        return cls(dict(data), str(path))

    def names(self, person: str) -> bool:
        return person in self.people.values()

    def person_of(self, token: str) -> str | None:
        """Compare against every token in constant time, so timing tells nothing about any of them."""
        found = None
        for known, person in self.people.items():
            if secrets.compare_digest(known.encode(), token.encode()):
                found = person
        return found


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def tokens_of(request: Request) -> TokenBook:
    """The tokens as the file says now (hitl/api/followed.py)."""
    return now(request.app.state.tokens)


def openid_provider(request: Request) -> OpenIDProvider | None:
    """The OpenID provider whose access tokens this API also accepts (hitl/api/oidc.py), if any."""
    return getattr(request.app.state, "openid", None)


async def identity(request: Request, authorization: str | None = Header(default=None)) -> Identity:
    """Who the bearer token proves: a token of the file, or else an access token of the OpenID
    provider (when one is configured); 401 with the reason otherwise."""
    book = tokens_of(request)
    provider = openid_provider(request)
    web = getattr(request.app.state, "web_sign_in", None)
    if authorization is None and web is not None and (signed_in_page := await web.identity_of(request)) is not None:
        try:  # the web inbox, signed in through the provider
            return signed_in(request, apart_from_the_token_file(request, signed_in_page))
        except TokenRefused as refused:
            raise HTTPException(401, str(refused)) from None
    if not book.people and provider is None:
        raise HTTPException(401, f"no API tokens are configured ({book.source}); see the README, 'HTTP API'",
                            headers={"WWW-Authenticate": "Bearer"})
    token = bearer_token(authorization)
    if token is None:
        raise HTTPException(401, "send Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
    person = book.person_of(token)
    if person is not None:
        return signed_in(request, Identity(person))
    if provider is None or not looks_like_jwt(token):
        raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    try:
        return signed_in(request, apart_from_the_token_file(request, await provider.identity(token)))
    except TokenRefused as refused:
        raise HTTPException(401, str(refused), headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}) from None
    except ProviderUnavailable as error:
        raise HTTPException(503, str(error), headers={"Retry-After": "5"}) from None


def apart_from_the_token_file(request: Request, who: Identity) -> Identity:
    """The provider's person, unless the token file (as it is now) names that person: a provider's
    name is never a way to become one of the file's people. A verified email address the file
    also names is the same person: the operator gave that address a token of its own."""
    provider = openid_provider(request)
    if provider is not None and provider.might_name(who.person):
        return who
    if tokens_of(request).names(who.person):
        claim = provider.person_claim if provider is not None else "person"
        raise TokenRefused(f"token refused: its {claim} {who.person!r} is a person of the token file (HITL_API_TOKENS); "
                           "the provider's people and the token file's are kept apart")
    return who


def signed_in(request: Request, who: Identity) -> Identity:
    """Note who the request is from: the policy reads for them (hitl/api/guard.py, policy_of)."""
    request.state.identity = who
    return who


async def caller(who: Identity = Depends(identity)) -> str:
    """The dependency of every authenticated route: the person the bearer token names, or 401."""
    return who.person


class StreamTickets:
    """Issue and check stream tickets: `<person b64>.<session b64>.<expiry>.<credential expiry>.<groups b64>.<page>.<hmac>`."""

    def __init__(self, secret: Callable[[], bytes], clock: Callable[[], float] = time.time,
                 store: ApiState | None = None) -> None:
        self.secret = secret  # read on first use: the signing key may be created then
        self.clock = clock
        # The digests of used tickets, until they expire: a ticket opens one stream, on any replica.
        self.store: ApiState = store if store is not None else MemoryState()

    def issue(self, person: str, session_id: str, until: float | None = None, groups: tuple[str, ...] = (),
              page: str | None = None) -> tuple[str, int]:
        """A ticket for `person` on `session_id`; `until`: when the credential it was bought with
        expires (an OpenID token's exp), so the stream it opens ends then too; `groups`: the
        groups that credential vouched for; `page`: the web sign-in it was bought with, whose
        sign-out ends the stream."""
        expires = int(self.clock()) + TICKET_SECONDS
        body = ".".join([_b64(person), _b64(session_id), str(expires), "" if until is None else str(int(until)),
                         _b64(json.dumps(list(groups))), page or ""])
        return f"{body}.{self._mac(body)}", expires

    async def redeem(self, ticket: str, session_id: str) -> Identity | None:
        """The ticket's person (with its credential's groups and expiry) when it is genuine, unexpired, unused and
        made for this session; the ticket is used up by it."""
        body, _, mac = ticket.rpartition(".")
        # Bytes, not str: compare_digest refuses a str with non-ASCII characters (a 500).
        if not body or not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        person_b64, session_b64, expires, until, groups_b64, page = (body.split(".") + [""] * 6)[:6]
        try:
            person, session, at_most = _unb64(person_b64), _unb64(session_b64), int(expires)
            credential_expires = float(until) if until else None
            groups = tuple(json.loads(_unb64(groups_b64)))
        except ValueError:
            return None
        now = self.clock()
        if session != session_id or at_most < now:
            return None
        if not await self.store.add_once(f"ticket:{hashlib.sha256(mac.encode()).hexdigest()}", at_most - now + 1):
            return None
        return Identity(person, groups, credential_expires, page or None)

    def _mac(self, body: str) -> str:
        return hmac.new(self.secret(), body.encode(), hashlib.sha256).hexdigest()


class QuerylessAccessLog(logging.Filter):
    """uvicorn's access log lines without query strings: a stream ticket is in one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3 and isinstance(record.args[2], str):
            path = record.args[2].split("?", 1)[0]
            record.args = (*record.args[:2], path, *record.args[3:])
        return True


def hide_queries_from_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(known, QuerylessAccessLog) for known in access.filters):
        access.addFilter(QuerylessAccessLog())


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
