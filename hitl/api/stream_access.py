"""Whether an open event stream's person may still read its session, asked before every delivery.

Access is not a fact of the moment a stream opens: an approver may read a
session only while one of its calls waits for them, the operator's policy may
change, and a token may be taken away. So a stream asks the access table
(hitl/access.py) again before it hands over each batch of events, from
facts read after those events were observed (hitl/api/events.py says why that
order), and ends with a last `end` event when the answer is no. A stream opened
with an OpenID provider's token also ends when that token expires, events or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from hitl.access import SessionFacts, verdict
from hitl.api.auth import TokenBook
from hitl.api.oidc import Identity
from hitl.client.events import SessionEvent

NO_LONGER_READABLE = "you may no longer read this session"
TOKEN_WITHDRAWN = "the token this stream was opened with is no longer accepted"
SIGN_IN_EXPIRED = "the sign-in this stream was opened with has expired; sign in again and reconnect"
SIGNED_OUT = "the web sign-in this stream was opened with has ended (signed out); sign in again and reconnect"
UNCHECKED = "whether you may still read this session could not be checked; reconnect to go on"


@dataclass(frozen=True)
class Reader:
    """Who listens: the person, and the bearer token of the file the stream was opened with (None for
    a ticket, whose person must still hold some token: the ticket was bought with one); or, for an
    OpenID provider's token (hitl/api/oidc.py), when that token expires: the stream ends then."""

    person: str
    token: str | None = None
    expires_at: float | None = None
    page: str | None = None  # the web sign-in it was opened through (Identity.page): it ends with it

    @classmethod
    def of(cls, who: Identity, token: str | None) -> Reader:
        """The reader a credential makes: a file's token is asked again before each batch, an
        OpenID provider's token holds until its exp."""
        if who.expires_at is not None:
            return cls(who.person, expires_at=who.expires_at, page=who.page)
        return cls(who.person, token)

    def refusal(self, facts: SessionFacts | None, policy: Any, tokens: TokenBook, now: float,
                signed_in: Callable[[str], bool] = lambda page: False) -> str | None:
        """Why this reader may not be given more events now (None: they may). The reason names no
        content: not which call settled, nor who may read instead. `signed_in`: whether a web
        sign-in is still live (WebSignIn.still_signed_in)."""
        if self.page is not None and not signed_in(self.page):
            return SIGNED_OUT
        if self.expires_at is not None:
            if now >= self.expires_at:
                return SIGN_IN_EXPIRED
        elif self.token is not None and tokens.person_of(self.token) != self.person:
            return TOKEN_WITHDRAWN
        elif self.token is None and self.person not in tokens.people.values():
            return TOKEN_WITHDRAWN
        if facts is None:
            return UNCHECKED
        if not verdict(self.person, "read", facts, policy).allowed:
            return NO_LONGER_READABLE
        return None


@dataclass
class SettledCalls:
    """Calls the observed events show settled (and not opened again since). The memo a describe
    reads is written in the workflow task that records the event, but nothing here should rest on
    how Temporal orders a memo and a query answer: a call the events show settled grants no more."""

    call_ids: set[str] = field(default_factory=set)

    def note(self, events: Iterable[SessionEvent]) -> None:
        for event in events:
            call_id = event.data.get("call_id")
            if not isinstance(call_id, str):
                continue
            if event.type == "pause_settled":
                self.call_ids.add(call_id)
            elif event.type == "pause_opened":
                self.call_ids.discard(call_id)

    def trim(self, facts: SessionFacts) -> SessionFacts:
        """The facts without the pauses the events have already seen settled."""
        if not self.call_ids:
            return facts
        return replace(facts, pending=tuple(item for item in facts.pending if item.get("call_id") not in self.call_ids))
