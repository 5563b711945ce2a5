"""The web inbox signs in through the OpenID provider (docs/security.md, "Single sign-on").

`GET /auth/sign-in` sends the browser to the provider (authorization code with
PKCE S256, a `state` bound to this browser by a short-lived cookie, the API's
audience as `resource`). `GET /auth/callback` exchanges the code for an access
token, verifies it exactly as a bearer JWT is verified (hitl/api/oidc.py), and
keeps a server-side session until the token expires (in the API's state, under
the digest of the cookie: hitl/api/state/); the browser holds only its
random id, in an HttpOnly, SameSite=Strict cookie. `POST /auth/sign-out` ends
that session. The page never sees a token.

Cross-site requests: a request signed in by the cookie counts only when the
browser says it comes from this origin (`Sec-Fetch-Site: same-origin`, or an
`Origin` that is this one), and a POST only with the session's CSRF token in
`X-CSRF-Token` (from `GET /auth/session`, which only this origin can read).
SameSite=Strict keeps the cookie off other sites' requests where browsers honour
it; the origin check and the token hold where they do not, and against pages on
a sibling subdomain, which SameSite counts as the same site.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from hitl.api.auth import apart_from_the_token_file
from hitl.api.oidc import FETCH_TIMEOUT, Identity, OpenIDProvider, ProviderUnavailable, TokenRefused
from hitl.api.state import ApiState, state_of

SESSION_COOKIE = "hitl_session"
LOGIN_COOKIE = "hitl_login"
LOGIN_SECONDS = 600  # a sign-in not finished at the provider within this is forgotten
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

router = APIRouter(prefix="/auth", tags=["web sign-in"])


@dataclass(frozen=True)
class WebSession:
    identity: Identity
    csrf: str

    def stored(self) -> str:
        who = self.identity
        return json.dumps({"person": who.person, "groups": list(who.groups), "expires_at": who.expires_at,
                           "csrf": self.csrf})

    @classmethod
    def from_stored(cls, text: str) -> WebSession:
        kept = json.loads(text)
        return cls(Identity(kept["person"], tuple(kept["groups"]), kept["expires_at"]), kept["csrf"])


@dataclass
class WebSignIn:
    """The web inbox's client at the provider. What it signs in, and the sign-ins under way, live in
    the API's state (hitl/api/state/), keyed by digests: the cookie and the `state` never are."""

    provider: OpenIDProvider
    client_id: str
    scopes: str = "openid email"

    @classmethod
    def from_env(cls, provider: OpenIDProvider | None) -> WebSignIn | None:
        client_id = os.environ.get("HITL_OIDC_CLIENT_ID", "").strip()
        if provider is None or not client_id:
            return None
        return cls(provider, client_id, os.environ.get("HITL_OIDC_SCOPES", "").strip() or "openid email")

    async def session_of(self, request: Request) -> WebSession | None:
        """The live session the request's cookie names."""
        sid = request.cookies.get(SESSION_COOKIE)
        return await session_at(state_of(request), page_of(sid)) if sid else None

    async def identity_of(self, request: Request) -> Identity | None:
        """Who the cookie signs in, for a request this page made; None without a live session."""
        session = await self.session_of(request)
        if session is None:
            return None
        if not from_this_origin(request):
            raise HTTPException(403, "a signed-in page of another origin may not call this API; "
                                     "use Authorization: Bearer")
        if request.method not in SAFE_METHODS and not secrets.compare_digest(
                request.headers.get("x-csrf-token", "").encode(), session.csrf.encode()):
            raise HTTPException(403, "missing or wrong X-CSRF-Token (GET /auth/session gives it to this page)")
        return replace(session.identity, page=page_of(request.cookies[SESSION_COOKIE]))

    async def still_signed_in(self, store: ApiState, page: str) -> bool:
        """Whether the web sign-in `page` names is live: a stream it opened ends once it is not."""
        return await session_at(store, page) is not None


async def session_at(store: ApiState, page: str) -> WebSession | None:
    """The live web sign-in `page` names (its entry expires with its token)."""
    kept = await store.get(f"web:{page}")
    session = WebSession.from_stored(kept) if kept is not None else None
    if session is None or (session.identity.expires_at or 0) <= time.time():
        return None
    return session


async def keep_session(store: ApiState, sid: str, session: WebSession) -> None:
    """Keep a web sign-in under its cookie's digest for as long as its token holds."""
    seconds = (session.identity.expires_at or 0) - time.time()
    if seconds > 0:
        await store.put(f"web:{page_of(sid)}", session.stored(), seconds)


def login_key(state: str) -> str:
    return f"login:{hashlib.sha256(state.encode()).hexdigest()}"


def page_of(sid: str) -> str:
    """A web sign-in's name that is not its cookie (it rides in stream tickets, in URLs)."""
    return hashlib.sha256(sid.encode()).hexdigest()[:32]


def from_this_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


def web_sign_in(request: Request) -> WebSignIn:
    web: WebSignIn | None = getattr(request.app.state, "web_sign_in", None)
    if web is None:
        raise HTTPException(404, "web sign-in is not configured (HITL_OIDC_ISSUER, HITL_OIDC_CLIENT_ID)")
    return web


def callback_url(request: Request) -> str:
    return str(request.url_for("callback"))


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


@router.get("/sign-in")
async def sign_in(request: Request) -> Response:
    web = web_sign_in(request)
    state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
    await state_of(request).put(login_key(state), verifier, LOGIN_SECONDS)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    try:
        authorize = await web.provider.endpoint("authorization_endpoint")
    except ProviderUnavailable as error:
        return PlainTextResponse(str(error), status_code=503)
    query = urlencode({"client_id": web.client_id, "response_type": "code", "redirect_uri": callback_url(request),
                       "scope": web.scopes, "state": state, "code_challenge": challenge,
                       "code_challenge_method": "S256", "resource": web.provider.audience})
    answer = RedirectResponse(f"{authorize}?{query}", status_code=303)
    # Lax, not Strict: it must come back with the provider's redirect, a navigation from its site.
    answer.set_cookie(LOGIN_COOKIE, state, max_age=LOGIN_SECONDS, path="/auth", httponly=True,
                      samesite="lax", secure=secure(request))
    return answer


@router.get("/callback", name="callback")
async def callback(request: Request, code: str | None = None, state: str | None = None,
                   error: str | None = None) -> Response:
    web = web_sign_in(request)
    if error is not None:
        return PlainTextResponse(f"sign-in failed at the provider: {error}", status_code=400)
    store = state_of(request)
    # The state must be this browser's own sign-in: otherwise someone's code could sign it in as
    # them. Only then is it used up, so whoever learns a state cannot end that sign-in with it.
    if not state or await store.get(login_key(state)) is None or not secrets.compare_digest(
            (request.cookies.get(LOGIN_COOKIE) or "").encode(), state.encode()):
        return sign_in_not_started_here()
    verifier = await store.take(login_key(state))  # once, on whichever replica the browser comes back to
    if verifier is None or code is None:
        return sign_in_not_started_here()
    try:
        token = await exchanged(web, request, code, verifier)
        who = apart_from_the_token_file(request, await web.provider.identity(token))
    except (TokenRefused, ProviderUnavailable) as refused:
        return PlainTextResponse(f"sign-in failed: {refused}", status_code=401)
    sid = secrets.token_urlsafe(32)
    await keep_session(store, sid, WebSession(who, secrets.token_urlsafe(32)))
    answer = RedirectResponse("/", status_code=303)
    answer.delete_cookie(LOGIN_COOKIE, path="/auth")
    answer.set_cookie(SESSION_COOKIE, sid, max_age=max(int((who.expires_at or 0) - time.time()), 0), path="/",
                      httponly=True, samesite="strict", secure=secure(request))
    return answer


def sign_in_not_started_here() -> Response:
    return PlainTextResponse("sign-in failed: this sign-in was not started here, or took too long; "
                             "start again at /auth/sign-in", status_code=400)


async def exchanged(web: WebSignIn, request: Request, code: str, verifier: str) -> str:
    """The access token the provider gives for the code (and this sign-in's PKCE verifier)."""
    import httpx  # the `sso` extra, there when sign-in is configured (hitl/api/oidc.py)

    token_endpoint = await web.provider.endpoint("token_endpoint")
    try:
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
            answer = await http.post(token_endpoint, data={
                "grant_type": "authorization_code", "code": code, "redirect_uri": callback_url(request),
                "client_id": web.client_id, "code_verifier": verifier, "resource": web.provider.audience})
        body = answer.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ProviderUnavailable(f"the provider's token endpoint did not answer: {error}") from None
    if answer.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
        reason = body.get("error_description") or body.get("error") if isinstance(body, dict) else None
        raise TokenRefused(f"the provider did not exchange the code ({reason or answer.status_code})")
    return str(body["access_token"])


@router.get("/session")
async def session(request: Request) -> JSONResponse:
    """Who the cookie signs in, with the CSRF token this page sends with every POST."""
    web: WebSignIn | None = getattr(request.app.state, "web_sign_in", None)
    current = await web.session_of(request) if web is not None else None
    if current is None or not from_this_origin(request):
        return JSONResponse({"detail": "not signed in", "sign_in": "/auth/sign-in" if web is not None else None},
                            status_code=401)
    return JSONResponse({"person": current.identity.person, "csrf": current.csrf, "sign_in": "/auth/sign-in",
                         "expires_at": current.identity.expires_at}, headers={"Cache-Control": "no-store"})


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    """Ends the server-side session (the cookie is worth nothing after) and clears the cookie."""
    web = web_sign_in(request)
    if await web.identity_of(request) is not None:  # a live session, and this page's own request (CSRF)
        await state_of(request).delete(f"web:{page_of(request.cookies[SESSION_COOKIE])}")
    answer = Response(status_code=204)
    answer.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure(request))
    return answer
