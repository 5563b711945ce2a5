"""Single sign-on settings the API will not run with stop it with one line: an issuer without an
audience, or one whose keys would be fetched over plain HTTP from another machine."""

from __future__ import annotations

import pytest

from hitl.api.oidc import OpenIDConfigError, OpenIDProvider


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
