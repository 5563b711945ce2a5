"""HITL_CHANNELS: where people hear of the pauses that need them (docs/interface.md, "Signed webhooks", "Slack").

Read once when the worker starts. A file that cannot be used, or a secret it
names that the environment lacks, stops the worker there with one line, as a
bad HITL_POLICY does. Secrets are named, never written in the file
(`secret_env` names a variable, HITL_WEBHOOK_SECRET say): their values stay
in the worker's environment, which tool servers never inherit
(activities/mcp/connection.py starts them with the MCP SDK's short list).
`webhooks`, `slack` and `email` act (activities/webhooks.py, activities/slack.py and the
API's hitl/api/slack.py, activities/mail.py and hitl/api/decide_links.py); the other parts are
checked so a file written for them is right before they do.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from workflows.forms import describe_validation_error

CHANNELS_VARIABLE = "HITL_CHANNELS"
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class ChannelsError(ValueError):
    """A channels file the worker cannot use; the message names the part and why."""


def web_address(url: str, schemes: tuple[str, ...] = ("http", "https")) -> str:
    parts = urlsplit(url)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValueError(f"must be a {' or '.join(schemes)} URL with a host")
    return url


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def private_address(url: str) -> str:
    """An address that what is sent to it crosses no network in the clear: https, or http to loopback."""
    web_address(url)
    parts = urlsplit(url)
    if parts.scheme == "http" and not is_loopback(parts.hostname or ""):
        raise ValueError("plain http is taken only to loopback (127.0.0.1, ::1, localhost): use https")
    return url


def secret_variable(name: str) -> str:
    if not VARIABLE_NAME.match(name):
        raise ValueError("must name an environment variable (letters, digits, _)")
    if name in DEFAULT_INHERITED_ENV_VARS:
        raise ValueError(f"{name} is passed to every tool server: name a variable of its own")
    return name


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Person(Part):
    email: str | None = Field(None, pattern=r"^[^@\s<>,]+@[^@\s<>,]+$")
    slack: str | None = None  # their Slack user id


class SlackChannel(Part):
    """Slack: each pause as a direct message to each person who may decide it. `channel` is
    shown the pauses its members may not all see only when the operator says, with
    `channel_may_see_every_session`, that everyone who reads it may see every session."""

    bot_token_env: str
    signing_secret_env: str
    channel: str | None = Field(None, min_length=1)
    channel_may_see_every_session: StrictBool = False
    api_url: str = "https://slack.com/api/"

    check_names = field_validator("bot_token_env", "signing_secret_env")(secret_variable)
    check_url = field_validator("api_url")(private_address)  # it carries the bot token

    @model_validator(mode="after")
    def _opt_in_names_its_channel(self) -> "SlackChannel":
        if self.channel_may_see_every_session and self.channel is None:
            raise ValueError("channel_may_see_every_session needs the channel it speaks of (channel)")
        return self

    @property
    def shared_channel(self) -> str | None:
        """The channel that cards for the session's own people go to, when the operator opted it in."""
        return self.channel if self.channel_may_see_every_session else None


class EmailChannel(Part):
    """Mail through an SMTP server (smtps:// for TLS from the start; smtp:// takes STARTTLS when
    the server offers it); the login, when the server wants one, from variables the file names."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    smtp_url: str
    sender: str = Field(alias="from", pattern=r"^[^@\s]+@[^@\s]+$")
    user_env: str | None = None
    password_env: str | None = None

    check_names = field_validator("user_env", "password_env")(
        lambda name: name if name is None else secret_variable(name))

    @field_validator("smtp_url")
    @classmethod
    def _smtp(cls, url: str) -> str:
        return web_address(url, ("smtp", "smtps"))


class WebhookChannel(Part):
    """An endpoint that receives each notification signed as Standard Webhooks sign it: what a
    receiver needs to act (ids, tool, a link to the card), or the whole card with `full_card`."""

    url: str
    secret_env: str
    full_card: StrictBool = False

    check_url = field_validator("url")(private_address)
    check_name = field_validator("secret_env")(secret_variable)


class Channels(Part):
    public_url: str | None = None
    people: dict[str, Person] = Field(default_factory=dict)
    slack: SlackChannel | None = None
    email: EmailChannel | None = None
    webhooks: list[WebhookChannel] = Field(default_factory=list)

    # Mail links carry one-use decision tokens to this address: never across a network in the clear.
    check_url = field_validator("public_url")(lambda url: url if url is None else private_address(url))

    @model_validator(mode="after")
    def _links_need_an_address(self) -> "Channels":
        if self.email is not None and self.public_url is None:
            raise ValueError("email needs public_url: its links point to {public_url}/decide/...")
        return self

    def secret_variables(self) -> list[str]:
        named = [hook.secret_env for hook in self.webhooks]
        if self.slack:
            named += [self.slack.bot_token_env, self.slack.signing_secret_env]
        if self.email:
            named += [name for name in (self.email.user_env, self.email.password_env) if name]
        return list(dict.fromkeys(named))


def parse_channels(text: str, source: str, environ: Mapping[str, str]) -> Channels:
    try:
        channels = Channels.model_validate(json.loads(text))
    except json.JSONDecodeError as error:
        raise ChannelsError(f"{source}: not JSON ({error.msg}, line {error.lineno})") from None
    except ValidationError as error:
        raise ChannelsError(f"{source}: {describe_validation_error(error)}") from None
    missing = [name for name in channels.secret_variables() if not environ.get(name)]
    if missing:
        raise ChannelsError(f"{source}: the secrets it names are not set in the environment: {', '.join(missing)}")
    return channels


def channels_from_env(environ: Mapping[str, str] = os.environ) -> Channels:
    """The channels `HITL_CHANNELS` names, read now; none configured without the variable."""
    path = environ.get(CHANNELS_VARIABLE, "").strip()
    if not path:
        return Channels()
    source = f"{CHANNELS_VARIABLE}={path}"
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ChannelsError(f"{source}: cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ChannelsError(f"{source}: not UTF-8 text") from None
    return parse_channels(text, source, environ)
