"""Single sign-on: the API's bearer JWTs from an OpenID provider (docs/security.md, "Single sign-on").

With `HITL_OIDC_ISSUER` set, a bearer token that is not in the token file is
verified as an access token of that provider: its signing keys come from the
`jwks_uri` its discovery document names, fetched once and kept; a token signed
by a key the set does not hold makes the set be fetched again (the provider
rotated its keys), at most once per `REFETCH_SECONDS`, so tokens with made-up
key ids cannot make the API hammer the provider.

Only the algorithms of the provider's own signing keys are accepted: never
`none`, never an HMAC (`HS*`), whose secret would be whatever key the verifier
holds, the provider's public one included. `iss`, `aud` and `exp` must be there
and right; `nbf` and `iat`, when there, are checked too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

import httpx
from joserfc import jwt
from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError, JoseError
from joserfc.jwk import import_key

from hitl.api.codec import is_loopback

REFETCH_SECONDS = 10  # an unknown key id fetches the key set again at most this often
KEYS_MAX_AGE = 600  # the key set is fetched again this long after it was, whatever the tokens say
LEEWAY_SECONDS = 30  # clock skew allowed between the provider and this API
FETCH_TIMEOUT = 10
# The algorithm a key without an `alg` signs with, by its type (and curve).
DEFAULT_ALGORITHMS: dict[Any, str] = {"RSA": "RS256", ("EC", "P-256"): "ES256", ("EC", "P-384"): "ES384",
                      ("EC", "P-521"): "ES512", ("OKP", "Ed25519"): "EdDSA"}


class OpenIDConfigError(ValueError):
    """Single sign-on settings this API will not run with (the server stops with the reason)."""


class TokenRefused(ValueError):
    """The token is not one this API accepts; the message says why, in one line (a 401)."""


class ProviderUnavailable(RuntimeError):
    """The provider's discovery document or keys could not be read (a 503: the token may be fine)."""


@dataclass(frozen=True)
class Identity:
    """Who a credential proves: the person, their groups (from the provider; none from the token
    file) and until when the credential holds (None: while the token file keeps it); `page`: the
    web sign-in it came through (hitl/api/web_sign_in.py, page_of), which sign-out ends."""

    person: str
    groups: tuple[str, ...] = ()
    expires_at: float | None = None
    page: str | None = None


@dataclass
class SigningKeys:
    """The provider's signature keys by key id, with the algorithm each signs with."""

    by_kid: dict[str | None, tuple[Any, str]] = field(default_factory=dict)
    fetched_at: float = float("-inf")

    @classmethod
    def from_jwks(cls, document: Any, fetched_at: float) -> SigningKeys:
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ProviderUnavailable("the provider's jwks_uri did not answer a JSON key set {\"keys\": [...]}")
        keys: dict[str | None, tuple[Any, str]] = {}
        for jwk in document["keys"]:
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig" or jwk.get("kty") == "oct":
                continue  # encryption keys and symmetric keys never verify a token here
            algorithm = jwk.get("alg") or DEFAULT_ALGORITHMS.get(jwk.get("kty")) \
                or DEFAULT_ALGORITHMS.get((jwk.get("kty"), jwk.get("crv")))
            if not isinstance(algorithm, str) or algorithm == "none" or algorithm.startswith("HS"):
                continue
            try:
                keys[jwk.get("kid")] = (import_key(jwk), algorithm)
            except (JoseError, ValueError, TypeError):
                continue  # a key this library cannot read verifies nothing; the others still do
        return cls(keys, fetched_at)

    def algorithms(self) -> list[str]:
        return sorted({algorithm for _, algorithm in self.by_kid.values()})


class OpenIDProvider:
    """Verifies the access tokens one provider issues for one audience (this API)."""

    def __init__(self, issuer: str, audience: str, *, person_claim: str = "email", groups_claim: str = "groups",
                 leeway: int = LEEWAY_SECONDS, refetch_seconds: float = REFETCH_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.issuer = issuer
        self.audience = audience
        self.person_claim = person_claim
        self.groups_claim = groups_claim
        self.leeway = leeway
        self.refetch_seconds = refetch_seconds
        self.clock = clock
        self.keys = SigningKeys()
        self.discovery: dict[str, Any] | None = None
        self.refetched_at = float("-inf")
        self.lock = asyncio.Lock()

    @classmethod
    def from_env(cls) -> OpenIDProvider | None:
        issuer = os.environ.get("HITL_OIDC_ISSUER", "").strip()
        if not issuer:
            return None
        audience = os.environ.get("HITL_OIDC_AUDIENCE", "").strip()
        if not audience:
            raise OpenIDConfigError("HITL_OIDC_ISSUER is set but HITL_OIDC_AUDIENCE is not: name the audience the "
                             "provider puts in this API's access tokens")
        scheme = issuer.partition("://")[0]
        host = urlsplit(issuer).hostname or ""
        if scheme != "https" and not (scheme == "http" and is_loopback(host)):
            # Keys fetched over plain HTTP could be anyone's: whoever sits on the path could sign as anybody.
            raise OpenIDConfigError(f"HITL_OIDC_ISSUER={issuer}: must be an https:// URL (http:// only on loopback)")
        return cls(issuer, audience,
                   person_claim=os.environ.get("HITL_OIDC_PERSON_CLAIM", "").strip() or "email",
                   groups_claim=os.environ.get("HITL_OIDC_GROUPS_CLAIM", "").strip() or "groups")

    async def identity(self, token: str) -> Identity:
        """The person the token proves, or TokenRefused (or ProviderUnavailable)."""
        header = unverified_header(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm == "none" or algorithm.startswith("HS"):
            raise TokenRefused(f"token refused: algorithm {algorithm!r} is not accepted (the provider's keys sign)")
        key, key_algorithm = await self.key_for(header.get("kid"))
        if algorithm != key_algorithm:
            raise TokenRefused(f"token refused: algorithm {algorithm!r} is not the one its key signs with ({key_algorithm})")
        try:
            claims = jwt.decode(token, key, algorithms=[key_algorithm]).claims
        except BadSignatureError:
            raise TokenRefused("token refused: its signature is not the provider's") from None
        except (JoseError, ValueError) as error:
            raise TokenRefused(f"token refused: it cannot be read as a signed JWT ({error})") from None
        self.check(claims)
        return self.identity_of(claims)

    def check(self, claims: dict[str, Any]) -> None:
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self.clock()), leeway=self.leeway,
            iss={"essential": True, "value": self.issuer}, aud={"essential": True, "value": self.audience},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise TokenRefused("token refused: it has expired (exp)") from None
        except ClaimError as error:
            reasons = {"iss": f"it was issued by another issuer, not {self.issuer}",
                       "aud": f"it is for another audience, not {self.audience}",
                       "nbf": "it is not valid yet (nbf)", "iat": "it was issued in the future (iat)"}
            raise TokenRefused(f"token refused: {reasons.get(error.claim, error.description)}") from None

    def identity_of(self, claims: dict[str, Any]) -> Identity:
        person = claims.get(self.person_claim)
        if not isinstance(person, str) or not person.strip():
            raise TokenRefused(f"token refused: it has no {self.person_claim!r} claim naming the person "
                               "(HITL_OIDC_PERSON_CLAIM)")
        groups = claims.get(self.groups_claim) or []
        if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
            raise TokenRefused(f"token refused: its {self.groups_claim!r} claim is not a list of group names")
        return Identity(person.strip(), tuple(groups), float(claims["exp"]))

    async def key_for(self, kid: Any) -> tuple[Any, str]:
        """The key with this id from the provider's set, fetching the set when it is old, or once
        more (rate-limited) when the id is new: a provider that rotates publishes its new key there."""
        if not isinstance(kid, (str, type(None))):
            raise TokenRefused("token refused: its key id (kid) is not a string")
        async with self.lock:
            now = self.clock()
            if now - self.keys.fetched_at > KEYS_MAX_AGE:
                await self.fetch_keys()
            elif kid not in self.keys.by_kid and now - self.refetched_at >= self.refetch_seconds:
                self.refetched_at = now
                await self.fetch_keys()
        found = self.keys.by_kid.get(kid)
        if found is None:
            raise TokenRefused(f"token refused: it is signed by a key the provider does not publish (kid {kid!r})")
        return found

    async def endpoint(self, name: str) -> str:
        """An endpoint the discovery document names (`jwks_uri`, `authorization_endpoint`, ...)."""
        if self.discovery is None:
            async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
                discovery = await fetched_json(http, self.issuer.rstrip("/") + "/.well-known/openid-configuration")
            if not isinstance(discovery, dict) or discovery.get("issuer") != self.issuer:
                raise ProviderUnavailable(f"the discovery document of {self.issuer} names another issuer "
                                          f"({discovery.get('issuer') if isinstance(discovery, dict) else None!r})")
            self.discovery = discovery
        url = self.discovery.get(name)
        if not isinstance(url, str):
            raise ProviderUnavailable(f"the discovery document of {self.issuer} names no {name}")
        return url

    async def fetch_keys(self) -> None:
        jwks_uri = await self.endpoint("jwks_uri")
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
            self.keys = SigningKeys.from_jwks(await fetched_json(http, jwks_uri), self.clock())


async def fetched_json(http: httpx.AsyncClient, url: str) -> Any:
    try:
        answer = await http.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        return answer.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ProviderUnavailable(f"the OpenID provider did not answer {url}: {error or type(error).__name__}") from None


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2


def unverified_header(token: str) -> dict[str, Any]:
    """The JOSE header, read only to choose the key; nothing in it is trusted."""
    encoded = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (ValueError, UnicodeDecodeError):
        raise TokenRefused("token refused: its header is not base64url JSON") from None
    if not isinstance(header, dict):
        raise TokenRefused("token refused: its header is not a JSON object")
    return header
