"""A message channel that keeps its messages in memory: what the notify activity's hook for
message channels (activities/message_channels.py) does, seen without Slack or mail."""

from __future__ import annotations

from dataclasses import dataclass, field

from activities.message_channels import ChannelFailed, Progress, Saved
from workflows.requests import MessageRef, Notification


@dataclass
class Message:
    to: str
    call_id: str
    event: str
    updates: list[str] = field(default_factory=list)


@dataclass
class RecordingChannel:
    """Shows each notification to its `to` (or `anyone`); `fail_after_first_message` fails an
    attempt right after its first new message, as a channel that went down mid-way would."""

    name: str = "recording"
    fail_after_first_message: bool = False
    messages: list[Message] = field(default_factory=list)
    attempts: int = 0

    async def show(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        self.attempts += 1
        for person in notification.to or ["anyone"]:
            key = f"{self.name}:{notification.event}:{person}"
            if key in progress.shown:
                continue
            self.messages.append(Message(person, notification.item["call_id"], notification.event))
            progress.shown[key] = MessageRef(channel=self.name, ref=str(len(self.messages) - 1))
            saved()
            if self.fail_after_first_message and self.attempts == 1:
                raise ChannelFailed("recording channel went down")

    async def settle(self, notification: Notification, progress: Progress, saved: Saved) -> None:
        assert notification.settled is not None
        for ref in notification.messages:
            if ref.channel != self.name or ref.ref in progress.updated:
                continue
            how = notification.settled
            self.messages[int(ref.ref)].updates.append(f"{how.outcome} by {how.by or 'nobody'}" + (f" via {how.via}" if how.via else ""))
            progress.updated.append(ref.ref)
            saved()

    def updates(self) -> list[list[str]]:
        return [message.updates for message in self.messages]
