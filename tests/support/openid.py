"""A real OpenID provider for the single sign-on tests: tests/js/oidc_provider.mjs (panva's
certified oidc-provider) as a node process on a free loopback port, and a person's way to a JWT
access token from it: the authorization code flow with PKCE, through the provider's own login
and consent pages, as a browser would go. `signed` makes a token the provider never issued but
its own key signed: claims no provider of sense would put in one (an `exp` of 1e300).

Test modules import the `openid` fixture from here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2 as httpx
import pytest
from joserfc import jwt
from joserfc.jwk import import_key

from hitl.devserver import free_port

JS = Path(__file__).resolve().parents[1] / "js"
AUDIENCE = "https://hitl.test/api"
OTHER_AUDIENCE = "https://elsewhere.test/api"
REDIRECT_URI = "http://127.0.0.1/callback"  # never fetched: the code is read from the redirect


def resource_of(audience: str) -> str:
    """The resource indicator (an absolute URI) the provider issues `audience`'s tokens for."""
    return audience if ":" in audience else f"urn:audience:{audience}"


@dataclass
class OpenID:
    """A running provider: its issuer URL and its private key set (as it signs with them)."""

    issuer: str
    keys: dict[str, Any]

    async def token_for(self, login: str, *, client: str = "inbox", resource: str = AUDIENCE) -> str:
        """`login`'s access token: sign in at the provider's login page, consent, exchange the code."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        async with httpx.AsyncClient(base_url=self.issuer, follow_redirects=False, timeout=30) as http:
            answer = await http.get("/auth", params={
                "client_id": client, "response_type": "code", "redirect_uri": REDIRECT_URI,
                "scope": "openid email api", "resource": resource, "state": secrets.token_urlsafe(8),
                "code_challenge": challenge, "code_challenge_method": "S256",
            })
            location = await through_login(http, answer, login, REDIRECT_URI)
            query = parse_qs(urlsplit(location).query)
            assert "code" in query, location
            exchanged = await http.post("/token", data={
                "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": REDIRECT_URI,
                "client_id": client, "code_verifier": verifier, "resource": resource,
            })
        assert exchanged.status_code == 200, exchanged.text
        return str(exchanged.json()["access_token"])

    def signed(self, claims: dict[str, Any]) -> str:
        """`claims` as a JWT signed with the provider's first key (published until it is retired)."""
        private = self.keys["keys"][0]
        header = {"alg": private["alg"], "kid": private["kid"], "typ": "at+jwt"}
        return jwt.encode(header, claims, import_key(private), algorithms=[private["alg"]])

    async def add_account(self, login: str, **claims: Any) -> None:
        """`login` signs in at the provider with these claims in its access tokens (beside `sub`)."""
        async with httpx.AsyncClient(base_url=self.issuer, timeout=30) as http:
            answer = await http.post("/test/account", json={"login": login, "claims": claims})
        assert answer.status_code == 200, answer.text

    async def retire(self) -> list[str]:
        """The provider publishes only the key it signs with now; the key ids it stopped publishing."""
        async with httpx.AsyncClient(base_url=self.issuer, timeout=30) as http:
            answer = await http.post("/test/retire")
        assert answer.status_code == 200, answer.text
        return list(answer.json()["retired"])

    async def rotate(self) -> str:
        """The provider signs with a new key from now on (the old one stays published); its key id."""
        async with httpx.AsyncClient(base_url=self.issuer, timeout=30) as http:
            answer = await http.post("/test/rotate")
        assert answer.status_code == 200, answer.text
        return str(answer.json()["kid"])

    async def public_keys(self) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=self.issuer, timeout=30) as http:
            discovery = (await http.get("/.well-known/openid-configuration")).json()
            return list((await http.get(discovery["jwks_uri"])).json()["keys"])


async def through_login(http: httpx.AsyncClient, answer: httpx.Response, login: str, redirect_uri: str) -> str:
    """Follow the provider's pages from `answer` as `login` would (sign in, consent) to where it
    sends the browser back: the redirect URI with the code and state, which is not followed."""
    for _ in range(12):
        location = answer.headers.get("location", "")
        if location.startswith(redirect_uri):
            return location
        if answer.is_redirect:
            answer = await http.get(urljoin(str(answer.url), location))
            continue
        assert answer.status_code == 200, answer.text
        action = re.search(r'<form[^>]*action="([^"]+)"', answer.text)
        prompt = re.search(r'name="prompt" value="(\w+)"', answer.text)
        assert action and prompt, answer.text
        form = {"prompt": "login", "login": login, "password": "any"} if prompt[1] == "login" else {"prompt": prompt[1]}
        answer = await http.post(urljoin(str(answer.url), action[1]), data=form)
    raise AssertionError(f"the provider never sent {login} back to {redirect_uri}: {answer.status_code} {answer.url}")


@contextmanager
def running_provider(keys: dict[str, Any] | None = None, *, jwks_max_age: int | None = None,
                     audiences: list[str] | None = None) -> Iterator[OpenID]:
    """The provider as a node process on a free port (with `keys`: the same keys as another one;
    with `jwks_max_age`: its key set served with that Cache-Control max-age; with `audiences`: the
    audiences it issues access tokens for instead of AUDIENCE and OTHER_AUDIENCE)."""
    environment = {"PORT": str(free_port()), "REDIRECT_URI": REDIRECT_URI, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    if keys is not None:
        environment["KEYS"] = json.dumps(keys)
    if jwks_max_age is not None:
        environment["JWKS_MAX_AGE"] = str(jwks_max_age)
    if audiences is not None:
        environment["AUDIENCES"] = json.dumps(audiences)
    process = subprocess.Popen(["node", "oidc_provider.mjs"], cwd=JS, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once it listens
        if not first:
            raise RuntimeError(f"the OpenID provider did not start: {process.stderr.read() if process.stderr else ''}"
                               " (run ./scripts/js-peers.sh)")
        started = json.loads(first)
        yield OpenID(started["issuer"], started["keys"])
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def openid() -> Iterator[OpenID]:
    with running_provider() as provider:
        yield provider
