"""docs/sso.md's recipes, each tried as far as this machine allows: the suite's real OpenID provider
(tests/js/oidc_provider.mjs) issues access tokens with the recipe's audience and the claims that
provider puts in its tokens (who names the person, where the groups are), and the API, configured
by the recipe's env block as printed (its issuer aside: the provider here runs on loopback), signs
that person in. The traps each recipe names are refused in one line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest

from hitl.api.oidc import OpenIDProvider
from tests.support.api_server import serving
from tests.support.openid import OpenID, resource_of, running_provider

SSO = Path(__file__).resolve().parents[2] / "docs" / "sso.md"


def env_block(recipe: str) -> dict[str, str]:
    """The KEY=value lines of the ```sh block under `## <recipe>` in docs/sso.md."""
    text = SSO.read_text()
    start = text.index(f"\n## {recipe}")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert block, f"no env block under ## {recipe}"
    return dict(line.split("=", 1) for line in block[1].splitlines() if line.strip())


@dataclass
class Recipe:
    heading: str
    login: str  # what the provider's `sub` is
    claims: dict[str, Any]  # what else that provider puts in its access tokens, per the recipe
    person: str
    groups: tuple[str, ...]
    # (audience asked for, claims) of a token the recipe says is refused, and the line that says why
    trap: tuple[str, dict[str, Any], str] | None = None
    extra_audiences: list[str] = field(default_factory=list)


ENTRA_APP = "6f1e2d3c-0000-4000-8000-0000000000a1"
RECIPES = [
    Recipe("Keycloak", "f3a5c9e0-keycloak-user-id",
           {"email": "ana@acme.example", "email_verified": True, "groups": ["payments"], "preferred_username": "ana"},
           "ana@acme.example", ("payments",),
           trap=("account", {"email": "ana@acme.example", "email_verified": True}, "for another audience, not hitl-api")),
    Recipe("Okta", "ana@acme.example", {"uid": "00u1abcd", "groups": ["payments", "Everyone"]},
           "ana@acme.example", ("payments", "Everyone")),
    Recipe("Entra ID", "3b1f0c2e-entra-object-id",
           {"preferred_username": "ana@acme.example", "roles": ["payments"], "groups": ["9a8b7c6d-object-id"],
            "ver": "2.0", "tid": "4d3c2b1a-0000-4000-8000-00000000cafe"},
           "ana@acme.example", ("payments",),
           trap=(f"api://{ENTRA_APP}", {"upn": "ana@acme.example", "ver": "1.0"}, f"for another audience, not {ENTRA_APP}"),
           extra_audiences=[f"api://{ENTRA_APP}"]),
    Recipe("Auth0", "auth0|65f0c1d2e3f4a5b6c7d8e9f0",
           {"https://hitl.example.com/email": "ana@acme.example", "https://hitl.example.com/roles": ["payments"]},
           "ana@acme.example", ("payments",),
           trap=("https://hitl.example.com/api", {"email": "ana@acme.example"},
                 "no 'https://hitl.example.com/email' claim naming the person")),
]


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenID]:
    """One provider that issues tokens for every recipe's audience (and the traps')."""
    audiences = [env_block(recipe.heading)["HITL_OIDC_AUDIENCE"] for recipe in RECIPES]
    audiences += [audience for recipe in RECIPES for audience in recipe.extra_audiences] + ["account"]
    with running_provider(audiences=list(dict.fromkeys(audiences))) as running:
        yield running


@pytest.fixture
async def configured(provider: OpenID, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
                     ) -> AsyncIterator[tuple[Recipe, OpenIDProvider, str]]:
    """The API as the recipe's env block configures it; the recipe, the API's provider and its address."""
    recipe: Recipe = request.param
    for name, value in env_block(recipe.heading).items():
        monkeypatch.setenv(name, provider.issuer if name == "HITL_OIDC_ISSUER" else value)
    openid = OpenIDProvider.from_env()
    assert openid is not None
    async with serving(None, openid=openid) as api:
        yield recipe, openid, api.base


async def person_signed_in(base: str, token: str) -> tuple[int, Any]:
    import httpx2 as httpx

    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        answer = await http.get("/me")
    return answer.status_code, answer.json()


@pytest.mark.parametrize("configured", RECIPES, ids=[recipe.heading for recipe in RECIPES], indirect=True)
async def test_the_recipes_env_block_signs_its_providers_person_in(
        provider: OpenID, configured: tuple[Recipe, OpenIDProvider, str]) -> None:
    recipe, openid, base = configured
    await provider.add_account(recipe.login, **recipe.claims)
    token = await provider.token_for(recipe.login, resource=resource_of(openid.audience))
    assert await person_signed_in(base, token) == (200, {"person": recipe.person})
    assert (await openid.identity(token)).groups == recipe.groups


@pytest.mark.parametrize("configured", [recipe for recipe in RECIPES if recipe.trap],
                         ids=[recipe.heading for recipe in RECIPES if recipe.trap], indirect=True)
async def test_the_trap_the_recipe_names_is_refused_in_one_line(
        provider: OpenID, configured: tuple[Recipe, OpenIDProvider, str]) -> None:
    recipe, _, base = configured
    assert recipe.trap is not None
    audience, claims, why = recipe.trap
    login = f"trapped-{recipe.login}"
    await provider.add_account(login, **claims)
    status, body = await person_signed_in(base, await provider.token_for(login, resource=resource_of(audience)))
    assert status == 401 and why in body["detail"] and "\n" not in body["detail"], body
