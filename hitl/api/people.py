"""`GET /me`: who the bearer token says the caller is (the web page greets them by it)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from hitl.api.auth import caller

router = APIRouter(tags=["people"])


@router.get("/me")
async def me(person: str = Depends(caller)) -> dict[str, str]:
    """The person your token names: the `by` of every decision you make through the API."""
    return {"person": person}
