"""Channels that show a pause in a message of their own (Slack, mail) and update it once settled.

The notify activity calls each with the notification and what earlier attempts at it already did
(`Progress`, kept in the activity's heartbeat details): a retry after a failure posts to nobody who
already has their message, and updates no message already updated, so nobody is sent twice what
they saw. `show` returns where it showed the pause (MessageRef); the workflow keeps those on the
pause and hands them back in the `settled` notification, untrusted: a channel checks a reference
is its own, for this session and call, before it acts on it (activities/slack.py signs its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from workflows.requests import MessageRef, Notification

Saved = Callable[[], None]


class ChannelFailed(Exception):
    """A channel that could not deliver now; its line is already in the worker's log.
    `final` when sending again cannot help; `retry_after` when the channel said how long to wait."""

    def __init__(self, line: str, final: bool = False, retry_after: float | None = None) -> None:
        super().__init__(line)
        self.final = final
        self.retry_after = retry_after


@dataclass
class Progress:
    """What the attempts at one notification did so far: the plain line, the messages shown (by
    recipient key, e.g. `slack:U024BE7LH`) and the messages updated (by reference)."""

    plain_sent: bool = False
    shown: dict[str, MessageRef] = field(default_factory=dict)
    updated: list[str] = field(default_factory=list)

    @classmethod
    def from_details(cls, details: Any) -> Progress:
        last = details[-1] if details else None
        if last == "plain notification sent":  # an attempt by a worker before message channels
            return cls(plain_sent=True)
        if not isinstance(last, dict):
            return cls()
        shown = {key: MessageRef.model_validate(ref) for key, ref in (last.get("shown") or {}).items()}
        return cls(bool(last.get("plain_sent")), shown, list(last.get("updated") or []))

    def details(self) -> dict[str, Any]:
        return {"plain_sent": self.plain_sent, "shown": {key: ref.model_dump() for key, ref in self.shown.items()},
                "updated": self.updated}


class MessageChannel(Protocol):
    name: str

    async def show(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        """Show the pause to each recipient not yet in `progress.shown`; add each message there and
        call `saved()` at once after each (it heartbeats). Raise ChannelFailed when one fails."""

    async def settle(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        """Update each of this channel's messages in `notification.messages` not yet in
        `progress.updated` with how the pause ended; likewise `saved()` after each."""


async def each_channel(channels: list[MessageChannel],
                       step: Callable[[MessageChannel], Awaitable[None]]) -> list[ChannelFailed]:
    """Every channel tried, one after another (they share one Progress); the failures returned."""
    failures = []
    for channel in channels:
        try:
            await step(channel)
        except ChannelFailed as failure:
            failures.append(failure)
    return failures
