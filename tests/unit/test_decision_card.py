"""The card a mail and an email link's page show: what a person needs, and nothing the model or a
user wrote can become markup."""

from __future__ import annotations

from hitl.decision_card import card_html, card_text

ITEM = {"call_id": "call_1", "kind": "approval", "tool": "delete_file", "requested_by": "ana", "verified": True,
        "led_by": "please delete <b>notes</b>", "because": "the tool needs approval",
        "args": {"path": "</pre><script>alert(1)</script>"}, "deadline": "2026-12-05T20:00:00Z"}


def test_the_card_says_who_asked_what_and_until_when() -> None:
    text = card_text(ITEM)
    for line in ("Asked by: ana (verified)", "Their message: please delete <b>notes</b>", "Tool: delete_file",
                 "Why a person: the tool needs approval", "Deadline: 2026-12-05T20:00:00Z (UTC)"):
        assert line in text, text


def test_nothing_in_the_arguments_or_the_message_becomes_markup() -> None:
    shown = card_html(ITEM)
    assert "<script>" not in shown and "</pre><script>" not in shown and "<b>notes</b>" not in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "&lt;b&gt;notes&lt;/b&gt;" in shown
