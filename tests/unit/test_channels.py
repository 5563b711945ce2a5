"""HITL_CHANNELS as the operator writes it: the documented file is taken whole, and a wrong part
is named in one line, before anything is sent."""

from __future__ import annotations

import pytest

from hitl.channels import ChannelsError, parse_channels

DOCUMENTED = """{"public_url": "https://hitl.example.com",
 "people": {"ana": {"email": "ana@example.com", "slack": "U024BE7LH"}},
 "slack": {"bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET",
           "channel": "C0APPROVALS", "api_url": "https://slack.com/api/"},
 "email": {"smtp_url": "smtp://127.0.0.1:1025", "from": "agent@example.com"},
 "webhooks": [{"url": "https://example.com/hooks/hitl", "secret_env": "HITL_WEBHOOK_SECRET"}]}"""
SECRETS = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "HITL_WEBHOOK_SECRET": "whsec_c2VjcmV0"}


def test_the_documented_file_is_read_whole() -> None:
    channels = parse_channels(DOCUMENTED, "HITL_CHANNELS=channels.json", SECRETS)
    assert [hook.url for hook in channels.webhooks] == ["https://example.com/hooks/hitl"]
    assert channels.people["ana"].slack == "U024BE7LH" and channels.email and channels.email.sender == "agent@example.com"
    assert channels.secret_variables() == ["HITL_WEBHOOK_SECRET", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"]


@pytest.mark.parametrize(("text", "named"), [
    ('{"webhooks": [{"url": "file:///etc/passwd", "secret_env": "S"}]}', "webhooks.0.url"),
    ('{"webhooks": [{"url": "https://x.example", "secret_env": "PATH"}]}', "PATH is passed to every tool server"),
    ('{"webhooks": [{"url": "https://x.example", "secret": "whsec_abc"}]}', "webhooks.0.secret"),
    ('{"email": {"smtp_url": "https://mail.example", "from": "a@example.com"}}', "email.smtp_url"),
    ('{"email": {"smtp_url": "smtp://mail.example", "from": "nobody"}}', "email.from"),
    ('{"email": {"smtp_url": "smtp://mail.example", "from": "a@example.com"}}', "email needs public_url"),
    ('{"public_url": "https://h.example", "email": {"smtp_url": "smtp://m.example", "from": "a@example.com", '
     '"password_env": "SMTP_PASSWORD"}}', "not set in the environment: SMTP_PASSWORD"),
    ('{"people": {"ana": {"email": "ana@example.com, eve@example.com"}}}', "people.ana.email"),
    ('{"public_url": "hitl.example.com"}', "public_url"),
    ('{"slack": {"bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET", "channel": ""}}',
     "slack.channel"),
    ('{"webhook": []}', "webhook: Extra inputs"),
    ('{"webhooks": [{"url": "https://x.example", "secret_env": "UNSET_SECRET"}]}', "not set in the environment: UNSET_SECRET"),
    ("{not json", "not JSON"),
])
def test_a_wrong_part_is_named_in_one_line(text: str, named: str) -> None:
    with pytest.raises(ChannelsError) as refused:
        parse_channels(text, "HITL_CHANNELS=channels.json", {**SECRETS, "S": "whsec_c2VjcmV0"})
    line = str(refused.value)
    assert line.startswith("HITL_CHANNELS=channels.json: ") and named in line and "\n" not in line, line


SLACK = '"slack": {"bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET"'


@pytest.mark.parametrize(("text", "named"), [
    ('{"webhooks": [{"url": "http://example.com/hooks", "secret_env": "S"}]}',
     "webhooks.0.url: Value error, plain http is taken only to loopback"),
    ('{"webhooks": [{"url": "http://10.0.0.7/hooks", "secret_env": "S"}]}', "plain http is taken only to loopback"),
    ('{"webhooks": [{"url": "https://x.example", "secret_env": "S", "full_card": "yes"}]}', "webhooks.0.full_card"),
    ("{" + SLACK + ', "api_url": "http://slack.example/api/"}}', "slack.api_url"),
    ('{"public_url": "http://hitl.internal.example"}', "public_url: Value error, plain http is taken only to loopback"),
    ("{" + SLACK + ', "channel_may_see_every_session": true}}', "channel_may_see_every_session needs the channel"),
    ("{" + SLACK + ', "channel": "C0", "channel_may_see_every_session": "true"}}', "slack.channel_may_see_every_session"),
    ("{" + SLACK + ', "channel": "C0", "channel_sees_all": true}}', "slack.channel_sees_all: Extra inputs"),
])
def test_a_channel_that_would_tell_more_than_it_should_is_refused_in_one_line(text: str, named: str) -> None:
    """Plain http beyond loopback, and an opt-in that is not a plain true or names no channel,
    stop the worker with one line naming the part."""
    with pytest.raises(ChannelsError) as refused:
        parse_channels(text, "HITL_CHANNELS=channels.json", {**SECRETS, "S": "whsec_c2VjcmV0"})
    line = str(refused.value)
    assert line.startswith("HITL_CHANNELS=channels.json: ") and named in line and "\n" not in line, line


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hooks", "http://[::1]:9/h", "http://localhost/h",
                                 "https://example.com/h"])
def test_loopback_http_and_https_webhooks_are_taken(url: str) -> None:
    text = '{"webhooks": [{"url": "%s", "secret_env": "S"}]}' % url
    [hook] = parse_channels(text, "HITL_CHANNELS=channels.json", {"S": "whsec_c2VjcmV0"}).webhooks
    assert hook.url == url and hook.full_card is False


def test_a_shared_channel_shows_cards_only_once_the_operator_opts_it_in() -> None:
    plain = parse_channels("{" + SLACK + ', "channel": "C0"}}', "f", SECRETS).slack
    opted = parse_channels("{" + SLACK + ', "channel": "C0", "channel_may_see_every_session": true}}', "f", SECRETS).slack
    bare = parse_channels("{" + SLACK + "}}", "f", SECRETS).slack
    assert plain and opted and bare
    assert (plain.shared_channel, opted.shared_channel, bare.shared_channel) == (None, "C0", None)
