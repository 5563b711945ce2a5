"""Single sign-on: the API's bearer JWTs from an OpenID provider (docs/security.md, "Single sign-on").

With `HITL_OIDC_ISSUER` set, a bearer token that is not in the token file is
verified as an access token of that provider: its signing keys come from the
`jwks_uri` its discovery document names, kept as long as the answer's
Cache-Control max-age says (at most `KEYS_MAX_AGE`, `KEYS_DEFAULT_AGE` when it
says nothing), so a key the provider stops publishing stops being trusted soon;
a token signed by a key the set does not hold makes the set be fetched again
(the provider rotated its keys), at most once per `REFETCH_SECONDS`, so tokens
with made-up key ids cannot make the API hammer the provider.

Only the algorithms of the provider's own signing keys are accepted: never
`none`, never an HMAC (`HS*`), whose secret would be whatever key the verifier
holds, the provider's public one included. `iss`, `aud` and `exp` must be there
and right; `nbf` and `iat`, when there, are checked too; each is a finite number,
and `exp` at most `max_token_seconds` from now (and from `iat`).

Who the token names (`identity_of`): with the `email` claim, a verified email
address (`email_verified: true`), so a name that is no address, like a token
file's `ops`, can never arrive from the provider; with any other claim, the
provider's own name, never one spelled as the policy spells a group (`@...`).
The token file's people are kept apart from the provider's in hitl/api/auth.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from hitl.api.codec import is_loopback
from hitl.extras import require

# joserfc and httpx are the `sso` extra: imported where a token or key is read, which happens
# only with HITL_OIDC_ISSUER set (`OpenIDProvider.from_env` checks they are installed).
if TYPE_CHECKING:
    import httpx

REFETCH_SECONDS = 10  # an unknown key id fetches the key set again at most this often
KEYS_MAX_AGE = 300  # the key set is fetched again at most this long after it was, whatever its max-age
KEYS_DEFAULT_AGE = 60  # ... and this long after when the provider's answer says nothing (Cache-Control)
LEEWAY_SECONDS = 30  # clock skew allowed between the provider and this API
MAX_TOKEN_SECONDS = 86_400  # a token's exp may be at most this far from now (HITL_OIDC_MAX_TOKEN_SECONDS)
TIME_CLAIMS = ("exp", "nbf", "iat")
# An address as providers verify them: something, one @, a domain with a dot; no spaces or control characters.
EMAIL_ADDRESS = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f.]+(\.[^@\s\x00-\x1f\x7f.]+)+")
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
    """The provider's signature keys by key id, with the algorithm each signs with; kept until
    `max_age` seconds after `fetched_at`."""

    by_kid: dict[str | None, tuple[Any, str]] = field(default_factory=dict)
    fetched_at: float = float("-inf")
    max_age: float = 0

    def stale(self, now: float) -> bool:
        return now - self.fetched_at >= self.max_age

    @classmethod
    def from_jwks(cls, document: Any, fetched_at: float, max_age: float) -> SigningKeys:
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ProviderUnavailable("the provider's jwks_uri did not answer a JSON key set {\"keys\": [...]}")
        from joserfc.errors import JoseError
        from joserfc.jwk import import_key

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
        return cls(keys, fetched_at, max_age)

    def algorithms(self) -> list[str]:
        return sorted({algorithm for _, algorithm in self.by_kid.values()})


class OpenIDProvider:
    """Verifies the access tokens one provider issues for one audience (this API)."""

    def __init__(self, issuer: str, audience: str, *, person_claim: str = "email", groups_claim: str = "groups",
                 leeway: int = LEEWAY_SECONDS, refetch_seconds: float = REFETCH_SECONDS,
                 max_token_seconds: int = MAX_TOKEN_SECONDS, clock: Callable[[], float] = time.time) -> None:
        self.issuer = issuer
        self.audience = audience
        self.person_claim = person_claim
        self.groups_claim = groups_claim
        self.leeway = leeway
        self.max_token_seconds = max_token_seconds
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
        require("sso", "HITL_OIDC_ISSUER")
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
                   groups_claim=os.environ.get("HITL_OIDC_GROUPS_CLAIM", "").strip() or "groups",
                   max_token_seconds=max_token_seconds_from_env())

    async def identity(self, token: str) -> Identity:
        """The person the token proves, or TokenRefused (or ProviderUnavailable)."""
        header = unverified_header(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm == "none" or algorithm.startswith("HS"):
            raise TokenRefused(f"token refused: algorithm {algorithm!r} is not accepted (the provider's keys sign)")
        key, key_algorithm = await self.key_for(header.get("kid"))
        if algorithm != key_algorithm:
            raise TokenRefused(f"token refused: algorithm {algorithm!r} is not the one its key signs with ({key_algorithm})")
        from joserfc import jwt
        from joserfc.errors import BadSignatureError, JoseError

        try:
            claims = jwt.decode(token, key, algorithms=[key_algorithm]).claims
        except BadSignatureError:
            raise TokenRefused("token refused: its signature is not the provider's") from None
        except (JoseError, ValueError) as error:
            raise TokenRefused(f"token refused: it cannot be read as a signed JWT ({error})") from None
        self.check(claims)
        return self.identity_of(claims)

    def check(self, claims: dict[str, Any]) -> None:
        for name in TIME_CLAIMS:
            if name in claims and not is_numeric_date(claims[name]):
                raise TokenRefused(f"token refused: its {name} is not a number of seconds (NumericDate)")
        from joserfc import jwt
        from joserfc.errors import ClaimError, ExpiredTokenError

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
        self.check_lifetime(claims["exp"], claims.get("iat"))

    def check_lifetime(self, exp: int | float, iat: int | float | None) -> None:
        """A token lives at most `max_token_seconds`: an `exp` beyond that (1e300) would keep a
        stolen token, a web sign-in and the streams it opens alive for ever."""
        longest = self.max_token_seconds + self.leeway
        if exp > self.clock() + longest:
            raise TokenRefused(f"token refused: its exp is more than {self.max_token_seconds} seconds from now")
        if iat is not None and exp - iat > longest:
            raise TokenRefused(f"token refused: its exp is more than {self.max_token_seconds} seconds after its iat")

    def identity_of(self, claims: dict[str, Any]) -> Identity:
        person = claims.get(self.person_claim)
        if not isinstance(person, str) or not person.strip():
            raise TokenRefused(f"token refused: it has no {self.person_claim!r} claim naming the person "
                               "(HITL_OIDC_PERSON_CLAIM)")
        person = person.strip()
        if self.person_claim == "email":
            self.check_email(person, claims.get("email_verified"))
        elif person.startswith("@"):
            raise TokenRefused(f"token refused: its {self.person_claim} {person!r} starts with '@', "
                               "as the policy names groups")
        groups = claims.get(self.groups_claim) or []
        if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
            raise TokenRefused(f"token refused: its {self.groups_claim!r} claim is not a list of group names")
        return Identity(person, tuple(groups), float(claims["exp"]))

    @staticmethod
    def check_email(email: str, verified: Any) -> None:
        """An email is a person only once the provider has verified it: anyone may type any address
        (or any word) into their profile at many providers."""
        if verified is not True:
            raise TokenRefused("token refused: its email is not verified by the provider (email_verified is not true)")
        if not is_email_address(email):
            raise TokenRefused(f"token refused: its email {email!r} is not an email address")

    def might_name(self, person: str) -> bool:
        """Whether `person` is a name only a verified token of this provider could carry (auth.py)."""
        return self.person_claim == "email" and is_email_address(person)

    async def key_for(self, kid: Any) -> tuple[Any, str]:
        """The key with this id from the provider's set, fetching the set when it is old, or once
        more (rate-limited) when the id is new: a provider that rotates publishes its new key there."""
        if not isinstance(kid, (str, type(None))):
            raise TokenRefused("token refused: its key id (kid) is not a string")
        async with self.lock:
            now = self.clock()
            if self.keys.stale(now):
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
            import httpx

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
        import httpx

        jwks_uri = await self.endpoint("jwks_uri")
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
            document, cache_control = await fetched_json_and_cache_control(http, jwks_uri)
        max_age = keys_max_age(cache_control, at_least=self.refetch_seconds)
        self.keys = SigningKeys.from_jwks(document, self.clock(), max_age)


def keys_max_age(cache_control: str | None, *, at_least: float) -> float:
    """How long a key set may be kept: its Cache-Control max-age (none for no-store or no-cache),
    never past KEYS_MAX_AGE nor under `at_least` (the refetch rate, so the provider is not
    hammered); KEYS_DEFAULT_AGE when the answer says nothing of it."""
    directives = [directive.strip().lower() for directive in (cache_control or "").split(",")]
    age: float = KEYS_DEFAULT_AGE
    for directive in directives:
        name, _, value = directive.partition("=")
        if name in ("no-store", "no-cache"):
            age = 0
            break
        if name == "max-age" and value.strip().strip('"').isdigit():
            age = int(value.strip().strip('"'))
    return max(at_least, min(age, KEYS_MAX_AGE))


def max_token_seconds_from_env() -> int:
    setting = os.environ.get("HITL_OIDC_MAX_TOKEN_SECONDS", "").strip()
    if not setting:
        return MAX_TOKEN_SECONDS
    if not setting.isdigit() or int(setting) == 0:
        raise OpenIDConfigError(f"HITL_OIDC_MAX_TOKEN_SECONDS={setting}: must be a whole number of seconds above 0 "
                                f"(the longest a token may live; default {MAX_TOKEN_SECONDS})")
    return int(setting)


def is_numeric_date(value: Any) -> bool:
    """A JSON number that is a time: not a boolean, not NaN or an infinity."""
    return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)))


def is_email_address(text: str) -> bool:
    return EMAIL_ADDRESS.fullmatch(text) is not None


async def fetched_json(http: httpx.AsyncClient, url: str) -> Any:
    return (await fetched_json_and_cache_control(http, url))[0]


async def fetched_json_and_cache_control(http: httpx.AsyncClient, url: str) -> tuple[Any, str | None]:
    import httpx

    try:
        answer = await http.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        return answer.json(), answer.headers.get("cache-control")
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
