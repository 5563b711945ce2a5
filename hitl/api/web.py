"""`GET /`: the web inbox, plain HTML and a little JavaScript from hitl/api/static/ (no build step).

The page holds no secret of the server's: the person types their API token once
(kept in the tab's sessionStorage), and the page calls the same routes as any
other client. Its Content-Security-Policy allows only this origin's scripts and
styles, so even a tool result that slipped past escaping could not run code.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {"inbox.js": "text/javascript", "inbox.css": "text/css",
                 "stats.js": "text/javascript", "stats.css": "text/css"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

router = APIRouter(tags=["web inbox"], include_in_schema=False)


@router.get("/")
async def page() -> Response:
    return FileResponse(STATIC / "inbox.html", media_type="text/html", headers=SECURITY_HEADERS)


@router.get("/stats/view")
async def stats_page() -> Response:
    """How people decide (GET /stats), for operators: the same sign-in as the inbox, in the same tab."""
    return FileResponse(STATIC / "stats.html", media_type="text/html", headers=SECURITY_HEADERS)


@router.get("/static/{name}")
async def asset(name: str) -> Response:
    if name not in CONTENT_TYPES:
        return Response(status_code=404)
    return FileResponse(STATIC / name, media_type=CONTENT_TYPES[name], headers=SECURITY_HEADERS)
