"""The card a mail and an email link's page show: what a person needs, and nothing the model or a
user wrote can become markup."""

from __future__ import annotations

from datetime import datetime, timezone

from activities.slack_card import card
from hitl.decision_card import card_html, card_text
from workflows.requests import Notification

ITEM = {"call_id": "call_1", "kind": "approval", "tool": "delete_file", "requested_by": "ana", "verified": True,
        "led_by": "please delete <b>notes</b>", "because": "the tool needs approval",
        "args": {"path": "</pre><script>alert(1)</script>"}, "deadline": "2026-12-05T20:00:00Z"}


def test_the_card_says_who_asked_what_and_until_when() -> None:
    text = card_text(ITEM)
    for line in ("Asked by: ana (verified)", "Their message: please delete <b>notes</b>", "Tool: delete_file",
                 "Why a person: the tool needs approval", "Deadline: 2026-12-05 20:00:00 UTC"):
        assert line in text, text


def test_nothing_in_the_arguments_or_the_message_becomes_markup() -> None:
    shown = card_html(ITEM)
    assert "<script>" not in shown and "</pre><script>" not in shown and "<b>notes</b>" not in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "&lt;b&gt;notes&lt;/b&gt;" in shown


def test_a_deadline_reads_as_a_time_without_microseconds() -> None:
    """The mail showed the raw ISO deadline, microseconds and all (issue 37, item 8)."""
    text = card_text({**ITEM, "deadline": "2026-12-05T20:00:00.123456+00:00"})
    assert "Deadline: 2026-12-05 20:00:00 UTC" in text, text
    assert "Deadline: none" in card_text({**ITEM, "deadline": None})
    assert "Deadline: soon (UTC)" in card_text({**ITEM, "deadline": "soon"}), "what cannot be read is shown as it came"


def slack_text(item: dict[str, object]) -> str:
    notification = Notification(session_id="s1", event="requested", item=item, to=["bob"],
                                at=datetime(2026, 12, 5, tzinfo=timezone.utc))
    _, blocks = card(notification)
    return blocks[0]["text"]["text"]


def test_slack_says_who_asked_as_the_mail_does() -> None:
    """Slack said `Asked by: ana` where mail said `ana (verified)`."""
    assert "*Asked by:* ana (verified)" in slack_text(ITEM)
    assert "*Asked by:* ana (asserted, not verified)" in slack_text({**ITEM, "verified": False})
    assert "*Deadline:* 2026-12-05 20:00:00 UTC" in slack_text({**ITEM, "deadline": "2026-12-05T20:00:00.5Z"})
