"""What a session tells Temporal's visibility store, so one list finds who waits for whom.

Search attributes (docs/production.md, "Finding waiting sessions on your own server") say the state,
the tools of the open pauses, since when the oldest waits and who may decide;
the memo `hitl_pending` holds the open pauses themselves, compact (absent when none), so an inbox
over thousands of sessions is one visibility list and no query per session.

Each upsert adds an event to the history, so values are upserted only when
they change. An attribute the server has not registered would fail the
workflow task for ever: only the names a worker found registered (recorded by
a local activity when the run starts) are ever upserted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

from workflows.limits import clip, json_size
from workflows.pauses import PendingCall

STATE = SearchAttributeKey.for_keyword("HitlState")
PENDING_TOOLS = SearchAttributeKey.for_keyword_list("HitlPendingTools")
WAITING_SINCE = SearchAttributeKey.for_datetime("HitlWaitingSince")
APPROVERS = SearchAttributeKey.for_keyword_list("HitlApprovers")
SEARCH_ATTRIBUTE_NAMES = [key.name for key in (STATE, PENDING_TOOLS, WAITING_SINCE, APPROVERS)]
MEMO_KEY = "hitl_pending"

ITEM_ARGS_BYTES = 2_000  # an item's arguments as an inbox lists them; the `pending` query has them whole
ITEM_TEXT_BYTES = 1_000  # a question or a result under review, as an inbox lists it
MEMO_BYTES = 48_000  # all open pauses together; an inbox row points to the session for the rest
# Temporal refuses a search attribute value over 2 KB (limit.searchAttributesSizeOfValue) by failing
# the workflow task, for ever: a list that does not fit is published shortened (tools) or absent
# (approvers: an inbox then lists the session for everyone and keeps only each person's items,
# read from the memo, which names every approver).
ATTRIBUTE_BYTES = 1_500


def compact_item(item: PendingCall, now: datetime) -> dict[str, Any]:
    """An open pause in a few kilobytes at most: what an inbox row or an event shows."""
    shown = item.view()
    for field in ("remind_at", "escalate_at"):
        shown.pop(field, None)
    if json_size(item.args) > ITEM_ARGS_BYTES:
        shown["args"], shown["args_truncated"] = {}, True
    for field in ("question", "result"):
        if isinstance(shown.get(field), str):
            shown[field] = clip(shown[field], ITEM_TEXT_BYTES)
    if json_size(shown.get("fields")) > ITEM_ARGS_BYTES:
        shown.pop("fields")
    if item.claim_until is not None and item.claim_until <= now:
        shown.pop("claimed_by", None)
        shown.pop("claim_until", None)
    return shown


def memo_items(items: Sequence[PendingCall], now: datetime) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    size = 0
    for item in sorted(items, key=lambda item: item.requested_at):
        shown = compact_item(item, now)
        size += json_size(shown)
        if kept and size > MEMO_BYTES:
            break
        kept.append(shown)
    return kept


def attribute_values(state: str, items: Sequence[PendingCall]) -> dict[str, Any]:
    """The four search attributes; None for one that is absent."""
    approvers: list[str] | None = None
    if items and all(item.approvers is not None for item in items):
        approvers = sorted({person for item in items for person in item.approvers or []})
        if json_size(approvers) > ATTRIBUTE_BYTES:
            approvers = None
    return {
        STATE.name: state,
        PENDING_TOOLS.name: fitting(sorted({item.tool for item in items})) or None,
        WAITING_SINCE.name: min(item.requested_at for item in items) if items else None,
        APPROVERS.name: approvers or None,
    }


def fitting(values: list[str]) -> list[str]:
    """The first values whose list stays within ATTRIBUTE_BYTES."""
    kept: list[str] = []
    for value in values:
        if json_size([*kept, value]) > ATTRIBUTE_BYTES:
            break
        kept.append(value)
    return kept


KEYS = {key.name: key for key in (STATE, PENDING_TOOLS, WAITING_SINCE, APPROVERS)}


class Publisher:
    """Upserts search attributes and the memo when (and only when) they change."""

    def __init__(self) -> None:
        self.registered: set[str] = set()
        self.enabled = False
        self.attributes: dict[str, Any] = {}
        self.memo: list[dict[str, Any]] | None = None

    def start(self, registered: Sequence[str]) -> None:
        """Begin from what the run already has: a new run inherits its predecessor's values."""
        self.enabled = True
        self.registered = set(registered) & set(SEARCH_ATTRIBUTE_NAMES)
        current = workflow.info().typed_search_attributes
        self.attributes = {name: current.get(KEYS[name]) for name in SEARCH_ATTRIBUTE_NAMES}
        try:  # whoever starts a session sets its first memo: one we cannot read is replaced
            memo = workflow.memo_value(MEMO_KEY, default=None)
        except Exception:
            memo = None
        self.memo = memo if isinstance(memo, list) else []

    def publish(self, state: str, items: Sequence[PendingCall], now: datetime) -> None:
        if not self.enabled:
            return
        values = attribute_values(state, items)
        updates: list[SearchAttributeUpdate[Any]] = []
        for name in sorted(self.registered):
            if self.attributes.get(name) == values[name]:
                continue
            self.attributes[name] = values[name]
            key = KEYS[name]
            updates.append(key.value_unset() if values[name] is None else key.value_set(values[name]))
        if updates:
            workflow.upsert_search_attributes(updates)
        memo = memo_items(items, now)
        if memo != self.memo:
            self.memo = memo
            workflow.upsert_memo({MEMO_KEY: memo or None})  # None removes the key: nothing waits
