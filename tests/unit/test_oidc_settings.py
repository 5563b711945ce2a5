"""Single sign-on settings the API will not run with stop it with one line: an issuer without an
audience, one whose keys would be fetched over plain HTTP from another machine, a longest token
lifetime that is no number of seconds. How long the provider's key set is kept."""

from __future__ import annotations

import pytest

from hitl.api.oidc import KEYS_DEFAULT_AGE, KEYS_MAX_AGE, OpenIDConfigError, OpenIDProvider, keys_max_age


def test_no_issuer_means_no_single_sign_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HITL_OIDC_ISSUER", raising=False)
    assert OpenIDProvider.from_env() is None


@pytest.mark.parametrize(("issuer", "audience", "said"), [
    ("https://login.example.com", "", "HITL_OIDC_AUDIENCE is not"),
    ("http://login.example.com", "https://hitl.example.com/api", "must be an https:// URL"),
    ("login.example.com", "https://hitl.example.com/api", "must be an https:// URL"),
])
def test_a_setting_it_will_not_run_with_says_why(monkeypatch: pytest.MonkeyPatch, issuer: str, audience: str, said: str) -> None:
    monkeypatch.setenv("HITL_OIDC_ISSUER", issuer)
    monkeypatch.setenv("HITL_OIDC_AUDIENCE", audience)
    with pytest.raises(OpenIDConfigError, match=said) as refused:
        OpenIDProvider.from_env()
    assert "\n" not in str(refused.value)


def test_the_claims_default_to_email_and_groups_and_loopback_may_be_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_OIDC_ISSUER", "http://127.0.0.1:9000")
    monkeypatch.setenv("HITL_OIDC_AUDIENCE", "https://hitl.example.com/api")
    monkeypatch.setenv("HITL_OIDC_PERSON_CLAIM", "preferred_username")
    provider = OpenIDProvider.from_env()
    assert provider is not None
    assert (provider.person_claim, provider.groups_claim) == ("preferred_username", "groups")


@pytest.mark.parametrize("setting", ["0", "-5", "a day", "1.5"])
def test_the_longest_token_lifetime_is_a_whole_number_of_seconds(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("HITL_OIDC_ISSUER", "https://login.example.com")
    monkeypatch.setenv("HITL_OIDC_AUDIENCE", "https://hitl.example.com/api")
    monkeypatch.setenv("HITL_OIDC_MAX_TOKEN_SECONDS", setting)
    with pytest.raises(OpenIDConfigError, match="HITL_OIDC_MAX_TOKEN_SECONDS=.*whole number of seconds") as refused:
        OpenIDProvider.from_env()
    assert "\n" not in str(refused.value)


def test_the_longest_token_lifetime_is_a_day_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_OIDC_ISSUER", "https://login.example.com")
    monkeypatch.setenv("HITL_OIDC_AUDIENCE", "https://hitl.example.com/api")
    monkeypatch.delenv("HITL_OIDC_MAX_TOKEN_SECONDS", raising=False)
    assert OpenIDProvider.from_env().max_token_seconds == 86_400  # type: ignore[union-attr]
    monkeypatch.setenv("HITL_OIDC_MAX_TOKEN_SECONDS", "3600")
    assert OpenIDProvider.from_env().max_token_seconds == 3600  # type: ignore[union-attr]


@pytest.mark.parametrize(("cache_control", "kept"), [
    (None, KEYS_DEFAULT_AGE), ("public", KEYS_DEFAULT_AGE), ("max-age=abc", KEYS_DEFAULT_AGE),
    ("public, max-age=120", 120), ("max-age=86400", KEYS_MAX_AGE),
    ("max-age=0", 10), ("no-store", 10), ("no-cache, max-age=3600", 10),
])
def test_the_key_set_is_kept_as_long_as_its_cache_control_says_within_bounds(cache_control: str | None, kept: float) -> None:
    """Never past five minutes (a key the provider stops publishing is trusted no longer), a minute
    when the answer says nothing, and never refetched faster than the rate unknown key ids allow."""
    assert keys_max_age(cache_control, at_least=10) == kept
