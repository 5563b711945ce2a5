"""`POST /channels/slack/interactions`: a click on a Slack card, as a verified decision.

A click decides as a decision through the API does (docs/interface.md, "Decision channels").

Slack signs each request with the app's signing secret (`X-Slack-Signature`, v0 = HMAC-SHA256 of
`v0:{timestamp}:{body}`): one that does not verify, is more than five minutes from now, or was
already taken once (by any replica sharing the API's state, hitl/api/state/) is refused (401) before anything is read from it. The clicking Slack user is
the person `people` maps them to; anyone unmapped is refused and told privately (an ephemeral
message). Then the same checks as a bearer's decision (hitl/api/guard.py, grant_on_call) and the
same `decide()` with `via="slack"`: the session itself judges approvers, N-of-M, four eyes, the
policy. A refusal is told to the clicker privately; Slack gets a 200 either way, as it expects.
Edit opens a modal with the arguments; its submission is decided like an approval with edited
arguments, and arguments the tool refuses are shown in the modal (`response_action: errors`).
A button (and the modal it opens) names the session's chain of runs it was shown in
(activities/slack_card.py): in another session under the same id it decides nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from hitl.api.calls import decide
from hitl.api.guard import grant_on_call
from hitl.api.state import ApiState, state_of
from hitl.channels import Channels
from hitl.extras import require
from workflows.limits import clip

if TYPE_CHECKING:
    from slack_sdk import WebClient
    from slack_sdk.signature import SignatureVerifier

log = logging.getLogger("hitl.slack")
router = APIRouter(prefix="/channels/slack", tags=["channels"])
PATH = "/channels/slack/interactions"
WINDOW_SECONDS = 5 * 60
EDIT_VIEW = "hitl_edit"
ARGS_BLOCK, ARGS_INPUT = "hitl_args", "args"
MODAL_ARGS_CHARS = 3_000  # Slack's cap on a plain-text input's initial value
NOT_YOURS = "You may not decide this call"
UNCHAINED = ("this card was made before cards named the run of their session: it decides nothing; "
             "decide in the inbox")


@dataclass
class SlackDoor:
    """The app's signing secret, its people, and a Web API client (for modals and private notes)."""

    verifier: SignatureVerifier
    people: dict[str, str]  # Slack user id -> person
    client: WebClient

    async def refusal(self, body: bytes, headers: Mapping[str, str], store: ApiState) -> str | None:
        """Why Slack did not send this request, or None. A request is taken once: its signature's
        digest is kept in the API's state for as long as its timestamp is within the window."""
        stamp, signature = headers.get("x-slack-request-timestamp", ""), headers.get("x-slack-signature", "")
        if not stamp.isdigit() or len(stamp) > 20:  # unix seconds; past 4300 digits int() raises (a 500)
            return "no X-Slack-Request-Timestamp"
        if abs(time.time() - int(stamp)) > WINDOW_SECONDS:
            return "the request's timestamp is more than five minutes from now"
        if not self.verifier.is_valid(body, stamp, signature):
            return "the request's X-Slack-Signature does not verify"
        seen = f"slack:{hashlib.sha256(signature.encode()).hexdigest()}"
        if not await store.add_once(seen, 2 * WINDOW_SECONDS):
            return "this request was already taken once"
        return None

    async def call(self, method: str, **arguments: Any) -> dict[str, Any]:
        from slack_sdk.errors import SlackClientError  # the `slack` extra, there when this door is

        try:
            return (await asyncio.to_thread(self.client.api_call, method, json=arguments)).data  # type: ignore[return-value]
        except (SlackClientError, OSError) as error:
            log.warning("slack %s failed: %s", method, clip(str(error), 300))
            return {}

    async def tell(self, payload: dict[str, Any], text: str) -> None:
        """A note only the clicker sees, in the conversation they clicked in."""
        channel = (payload.get("container") or {}).get("channel_id") or (payload.get("channel") or {}).get("id")
        user = (payload.get("user") or {}).get("id")
        if channel and user:
            await self.call("chat.postEphemeral", channel=channel, user=user, text=clip(text, 2_000))


def slack_door(channels: Channels, environ: Mapping[str, str]) -> SlackDoor | None:
    """Slack's door when HITL_CHANNELS has `slack`: its library (the `slack` extra) is imported only then."""
    if channels.slack is None:
        return None
    require("slack", "HITL_CHANNELS slack")
    from slack_sdk import WebClient
    from slack_sdk.signature import SignatureVerifier

    return SlackDoor(SignatureVerifier(environ[channels.slack.signing_secret_env]),
                     {where.slack: person for person, where in channels.people.items() if where.slack},
                     WebClient(token=environ[channels.slack.bot_token_env], base_url=channels.slack.api_url, timeout=10))


@router.post(PATH.removeprefix("/channels/slack"), include_in_schema=True)
async def interactions(request: Request) -> Response:
    """Slack's interactivity request URL (no bearer token: Slack's signature proves the sender)."""
    door: SlackDoor | None = request.app.state.slack
    if door is None:
        raise HTTPException(404, "Slack is not configured here (HITL_CHANNELS has no slack)")
    body = await request.body()
    refusal = await door.refusal(body, {name.lower(): value for name, value in request.headers.items()},
                                 state_of(request))
    if refusal is not None:
        raise HTTPException(401, refusal)
    try:
        payload = json.loads(parse_qs(body.decode())["payload"][0])
        kind, user = payload["type"], payload["user"]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise HTTPException(400, "not an interaction payload (payload=<json> with type and user)") from None
    person = door.people.get(user)
    if person is None:
        log.warning("slack: refused a click by %s, whom HITL_CHANNELS' people do not map", clip(str(user), 40))
        await door.tell(payload, "You are not known to this agent's operator: your click decided nothing.")
        return Response(status_code=200)
    if kind == "block_actions":
        await clicked(request, door, payload, person)
        return Response(status_code=200)
    if kind == "view_submission" and (payload.get("view") or {}).get("callback_id") == EDIT_VIEW:
        return await edited(request, payload, person)
    return Response(status_code=200)  # other interactions (a modal closed, a shortcut): nothing to do


async def clicked(request: Request, door: SlackDoor, payload: dict[str, Any], person: str) -> None:
    try:
        [action] = payload["actions"]
        action_id, about = action["action_id"], json.loads(action["value"])
        session_id, call_id, sha, chain = about["session"], about["call"], about.get("sha"), about.get("chain")
    except (ValueError, KeyError, TypeError):
        await door.tell(payload, "This button is not one of this agent's.")
        return
    if not isinstance(chain, str):
        await door.tell(payload, f"Not decided: {UNCHAINED}.")
        return
    verb = "answer" if action_id.startswith("answer:") else action_id
    if verb not in ("approve", "reject", "answer", "edit"):
        await door.tell(payload, "This button is not one of this agent's.")
        return
    stale = {"expected_args_sha256": sha} if sha and verb != "answer" else {}
    fields = {"answer": about.get("answer")} if verb == "answer" else stale
    try:
        grant = await grant_on_call(request, session_id, call_id, person, "approve" if verb == "edit" else verb,
                                    issued_in=chain)
        if verb == "edit":
            await door.call("views.open", trigger_id=payload.get("trigger_id"),
                            view=edit_view(session_id, call_id, grant.item, chain))
            return
        await decide(request, session_id, call_id, verb, grant, fields, via="slack", issued_in=chain)  # type: ignore[arg-type]
    except HTTPException as refused:
        await door.tell(payload, told_why(refused))


def told_why(refused: HTTPException) -> str:
    """A refusal as the clicker reads it. Someone who may not see the session is told, in words,
    that they are not among the call's deciders (the API says "unknown session": a card they were
    shown, in a channel the operator opted in, names it already); the same words for a session
    that does not exist, so the answer tells nothing of which sessions do."""
    if refused.status_code == 404 and str(refused.detail).startswith("unknown session"):
        return (f"{NOT_YOURS}: only the approvers it names may, or, when it names none, its session's owner, "
                "participants and the operators. Your click decided nothing.")
    if refused.status_code == 403:
        return f"{NOT_YOURS}: {refused.detail}. Your click decided nothing."
    return f"Not decided: {refused.detail}"


def edit_view(session_id: str, call_id: str, item: dict[str, Any] | None, chain: str) -> dict[str, Any]:
    args = json.dumps((item or {}).get("args", {}), indent=2, ensure_ascii=False)
    tool = (item or {}).get("tool", "the tool")
    return {
        "type": "modal", "callback_id": EDIT_VIEW, "title": {"type": "plain_text", "text": "Edit, then approve"},
        "submit": {"type": "plain_text", "text": "Approve"}, "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": json.dumps({"session": session_id, "call": call_id, "chain": chain,
                                        "sha": (item or {}).get("args_sha256")}),
        "blocks": [{"type": "input", "block_id": ARGS_BLOCK,
                    "label": {"type": "plain_text", "text": clip(f"Arguments of {tool} (JSON)", 150)},
                    "element": {"type": "plain_text_input", "action_id": ARGS_INPUT, "multiline": True,
                                "initial_value": clip(args, MODAL_ARGS_CHARS)}}],
    }


async def edited(request: Request, payload: dict[str, Any], person: str) -> Response:
    """The edit modal submitted: approve with its arguments, or say in the modal why not."""
    try:
        view = payload["view"]
        about = json.loads(view["private_metadata"])
        text = view["state"]["values"][ARGS_BLOCK][ARGS_INPUT]["value"] or ""
        session_id, call_id, chain = about["session"], about["call"], about.get("chain")
    except (ValueError, KeyError, TypeError):
        return errors("this form is not one of this agent's")
    if not isinstance(chain, str):
        return errors(UNCHAINED)
    try:
        args = json.loads(text)
    except ValueError as error:
        return errors(f"not JSON: {error}")
    if not isinstance(args, dict):
        return errors("the arguments must be a JSON object")
    fields = {"args": args, **({"expected_args_sha256": about["sha"]} if about.get("sha") else {})}
    try:
        grant = await grant_on_call(request, session_id, call_id, person, "approve", issued_in=chain)
        await decide(request, session_id, call_id, "approve", grant, fields, via="slack", issued_in=chain)
    except HTTPException as refused:
        return errors(told_why(refused))
    return Response(status_code=200)


def errors(why: str) -> JSONResponse:
    return JSONResponse({"response_action": "errors", "errors": {ARGS_BLOCK: clip(why, 500)}})
