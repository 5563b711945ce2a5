"""docs/slack-app-manifest.yaml asks Slack for what the product uses, no more: the bot scopes of the
Web API methods activities/slack*.py and hitl/api/slack.py call, the interactivity request URL the
API serves, and no slash command or event subscription (the API serves no route for either)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from hitl.api import slack

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "docs" / "slack-app-manifest.yaml"
CALLERS = [ROOT / "activities" / "slack.py", ROOT / "activities" / "slack_card.py", ROOT / "hitl" / "api" / "slack.py"]
# The bot scope each Web API method needs (Slack's method reference); a method not listed here
# fails the test below until its scope is written down, here and in the manifest.
SCOPE_OF = {"chat.postMessage": "chat:write", "chat.update": "chat:write", "chat.postEphemeral": "chat:write",
            "views.open": None}


def manifest() -> dict[str, Any]:
    loaded = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(loaded, dict)
    return loaded


def methods_called() -> set[str]:
    """Every `call("<method>", ...)` the Slack code makes (its one way to the Web API)."""
    return {method for path in CALLERS for method in re.findall(r'\bcall\(\s*"([a-z]+\.[A-Za-z.]+)"', path.read_text())}


def test_the_code_calls_the_methods_this_test_knows() -> None:
    called = methods_called()
    assert {"chat.postMessage", "chat.update", "views.open"} <= called, called  # the pattern still finds them
    assert called <= SCOPE_OF.keys(), f"a Web API method whose scope is not written down: {called - SCOPE_OF.keys()}"


def test_the_manifest_asks_for_the_scopes_those_methods_need_and_no_other() -> None:
    needed = {SCOPE_OF[method] for method in methods_called()} - {None}
    assert set(manifest()["oauth_config"]["scopes"]["bot"]) == needed
    assert "user" not in manifest()["oauth_config"]["scopes"], "the product acts as its bot only"


def test_interactivity_points_at_the_route_the_api_serves() -> None:
    interactivity = manifest()["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert re.fullmatch(r"https://[^/]+" + re.escape(slack.PATH), interactivity["request_url"]), interactivity
    served = {route.path for route in slack.router.routes}  # type: ignore[attr-defined]
    assert served == {slack.PATH}, f"a Slack route the manifest does not name: {served}"


def test_no_slash_commands_events_or_socket_mode() -> None:
    """The API serves no route for a slash command or an event, and clicks arrive over HTTPS."""
    features, settings = manifest()["features"], manifest()["settings"]
    assert "slash_commands" not in features and "shortcuts" not in features
    assert "event_subscriptions" not in settings
    assert settings["socket_mode_enabled"] is False


def test_cards_by_direct_message_need_the_messages_tab() -> None:
    assert manifest()["features"]["app_home"]["messages_tab_enabled"] is True
    assert "bot_user" in manifest()["features"]


def test_the_slack_docs_point_to_the_manifest() -> None:
    assert "slack-app-manifest.yaml" in (ROOT / "docs" / "interface.md").read_text()
