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
from datetime import datetime, timedelta
from typing import Iterable

from temporalio import activity
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from hitl.access import SessionFacts, expanded, may_read, session_people
from workflows.policy import OperatorPolicy, PolicyError, policy_from_env
from hitl.decision_keys import trusted_keys
from workflows.deciders import CallRules, consenting
from workflows.requests import Notification
from workflows.stand_in_book import book_id
from workflows.stand_ins import StandIn, refusal_to_stand_in

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
    return with_stand_ins(notification, [person for person in named if may_read(person, session, policy)])


def with_stand_ins(notification: Notification, people: Iterable[str]) -> list[str]:
    """`people` and the stand-ins of each of them for this pause (Notification.stand_ins: the notify
    activity kept only those whose hand-over covers it and who may decide it for them); sorted."""
    people = set(people)
    return sorted(people | {delegate for delegate, delegator in (notification.stand_ins or {}).items()
                            if delegator in people})


async def stand_ins_of(notification: Notification, policy: OperatorPolicy | None, now: datetime) -> dict[str, str]:
    """delegate -> delegator for this pause: live hand-overs in the book of stand-ins of this task
    queue, sealed by a key the worker trusts, covering the tool where the policy allows it, whose
    delegate the rules let decide it for the delegator (workflows/stand_ins.py). Empty when the book
    cannot be read (said in the log): the pause still reaches the people it is for."""
    tool = str(notification.item.get("tool", "?"))
    if policy is None or notification.event == "settled" or not policy.allows_delegation(tool):
        return {}
    try:
        handle = activity.client().get_workflow_handle(book_id(activity.info().task_queue))
        listed = await handle.query("list", rpc_timeout=timedelta(seconds=10))
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            log.warning("notify: the book of stand-ins did not answer, so no stand-in is shown the pause: %s", error)
        return {}
    except WorkflowQueryFailedError as error:
        log.warning("notify: the book of stand-ins could not answer, so no stand-in is shown the pause: %s", error)
        return {}
    trusted, call = trusted_keys(), CallRules.of(notification.item)
    found: dict[str, str] = {}
    for entry in listed if isinstance(listed, list) else []:
        try:
            stand_in = StandIn.model_validate(entry)
        except ValueError:
            continue  # not the book's: anyone who reaches Temporal may write there
        if (stand_in.covers(tool, now) and stand_in.sealed_by(trusted)
                and refusal_to_stand_in(call, stand_in.to, stand_in.from_, consenting(call), expand=policy.expand) is None):
            found.setdefault(stand_in.to, stand_in.from_)
    return found
