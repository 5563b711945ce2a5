"""Who a notification's card may be shown to: whoever may decide its pause and may see its session.

docs/interface.md, "Slack"; docs/security.md, "Who may see and act on a session".

The rule is the API's own (hitl/access.py): a session's readers are its owner, participants,
the operators and whoever may decide one of its open calls. The worker applies it to what the
workflow told it (the session's owner and participants, the pause and whom it names) and the
operator's policy as it reads it now (operators, @groups). A pause that names approvers goes to
them (and whom an escalation adds, once they may decide it); one that names none goes to the
session's own people, each of them. Nobody else: a name that may not see the session is dropped.
"""

from __future__ import annotations

import logging

from hitl.access import SessionFacts, expanded, may_read, session_people
from workflows.policy import OperatorPolicy, PolicyError, policy_from_env
from workflows.requests import Notification

log = logging.getLogger("hitl.notify")


def operator_policy() -> OperatorPolicy | None:
    """HITL_POLICY as it reads now; without one (or unreadable: said in the log) no operators nor groups."""
    try:
        return policy_from_env()
    except PolicyError as error:
        log.warning("notify: the operator policy is unreadable, so no operator or group is shown the pause: %s", error)
        return None


def session_of(notification: Notification) -> SessionFacts:
    """The session as the notification describes it, with the pause open in it. A run from before
    notifications named the session's people names none: the person who asked is one of them."""
    told = notification.participants is not None
    owner = notification.owner if told else notification.item.get("requested_by")
    return SessionFacts(notification.session_id, "", False, owner, tuple(notification.participants or ()),
                        (notification.item,))


def names_the_session_people(notification: Notification) -> bool:
    """Whether the pause waits for the session's own people (it names no one)."""
    return not notification.to


def deciders_who_may_see(notification: Notification, policy: OperatorPolicy | None) -> list[str]:
    """Each person the pause is for, as people, who may see its session; sorted, so each attempt
    at a notification meets them in one order."""
    session = session_of(notification)
    named = session_people(session, policy) if names_the_session_people(notification) \
        else expanded(notification.to, policy)
    return sorted(person for person in named if may_read(person, session, policy))
