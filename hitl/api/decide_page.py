"""The pages an email link opens (hitl/api/decide_links.py): the card with one button, what the
button did, or why the link decides nothing. Plain HTML, no script, everything escaped."""

from __future__ import annotations

import html
from typing import Any

from fastapi.responses import HTMLResponse

from hitl.decision_card import card_html, title
from hitl.email_links import LinkClaims, choice_label

# The token is in the address: no referrer carries it elsewhere, no cache keeps the page. The one
# form posts to this same address; nothing else may load or run.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex",
}
STYLE = ("body{font-family:system-ui,sans-serif;max-width:40rem;margin:1rem auto;padding:0 1rem}"
         "th{padding-right:1rem}pre{white-space:pre-wrap;margin:0}"
         "button{font-size:1.2rem;padding:.8rem 1.6rem;margin-top:1rem}")


def page(status: int, heading: str, body: str = "") -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html><head><meta charset=utf-8>"
                        f"<meta name=viewport content='width=device-width,initial-scale=1'>"
                        f"<title>{html.escape(heading)}</title><style>{STYLE}</style></head>"
                        f"<body><h1 data-role=heading>{html.escape(heading)}</h1>{body}</body></html>",
                        status_code=status, headers=HEADERS)


def refused(status: int, reason: str) -> HTMLResponse:
    return page(status, "This link decides nothing", f"<p data-role=reason>{html.escape(reason)}</p>")


def confirm(claims: LinkClaims, item: dict[str, Any]) -> HTMLResponse:
    """The card and ONE button: opening the link decided nothing, the button decides."""
    label = choice_label(claims.verb, claims.answer)
    return page(200, title(item), f"{card_html(item)}"
                f"<p>Opening this page decided nothing. You decide as <b>{html.escape(claims.person)}</b>:</p>"
                f"<form method=post><button type=submit data-choice='{html.escape(claims.choice, quote=True)}'>"
                f"{html.escape(label)}</button></form>")


def decided(claims: LinkClaims, item: dict[str, Any]) -> HTMLResponse:
    return page(200, f"Done: {choice_label(claims.verb, claims.answer)}",
                f"<p data-role=outcome>{html.escape(choice_label(claims.verb, claims.answer))} on "
                f"{html.escape(item['tool'])}, decided by {html.escape(claims.person)} via email.</p>")
