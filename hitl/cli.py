"""python starter.py: the client. Start sessions, chat, list and answer what is pending.

Decisions go through the validated Updates, so a refused decision is reported
at once (exit code 2) instead of being silently recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from typing import Any, Awaitable, Callable

from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from hitl.arguments import OneLineParser
from hitl.encryption import sealed_answer
from hitl.exit_cleanly import exit_with
from hitl.console.render import args_diff, describe_pending, print_json, render_status, render_transcript, say
from hitl.client.python_client import Decision, HitlClient, Session
from hitl.client.refusals import Refused
from hitl.startup import model_warning
from hitl.client.workers import NoWorker
from hitl import telemetry
from hitl.evidence import command as evidence_command
from hitl.settings import Settings, connect, unreachable


def parser() -> OneLineParser:
    root = OneLineParser(prog=os.path.basename(sys.argv[0]) or "starter.py", description=__doc__.splitlines()[0])
    root.add_argument("--json", action="store_true", help="print machine-readable JSON")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    start = commands.add_parser("start", help="start a session with a first message")
    start.add_argument("message", help="the first message, as the person would type it")
    start.add_argument("--session", help="session id (default: a new one)")
    start.add_argument("--by", help=BY)
    start.add_argument("--tools", help="comma-separated tool names (default: all)")
    start.add_argument("--model", help="the model's name (default: HITL_MODEL, or the worker's)")
    start.add_argument("--system-prompt", help="the system prompt (default: the product's)")
    start.add_argument("--max-steps", type=int, help="model calls per turn before the session stops the turn")
    start.add_argument("--approval-timeout", type=float, dest="approval_timeout_seconds",
                       help="seconds an approval waits before the call is rejected as timed out")
    start.add_argument("--answer-timeout", type=float, dest="answer_timeout_seconds",
                       help="seconds a question waits for its answer")
    start.add_argument("--idle-timeout", type=float, dest="idle_timeout_seconds",
                       help="seconds an idle session waits for a message before it closes")

    send = commands.add_parser("send", help="send a message (steers a running turn)")
    send.add_argument("session", help=SESSION)
    send.add_argument("text", help="the message (quote it)")
    send.add_argument("--by", help=BY)

    for name, text in (("pending", "what waits for a person"), ("status", "the session's state"),
                       ("transcript", "the conversation"), ("audit", "every request and decision")):
        commands.add_parser(name, help=text).add_argument("session", help=SESSION)

    approve = commands.add_parser("approve", help="approve a pending call, optionally with edited args")
    approve.add_argument("session", help=SESSION)
    approve.add_argument("call", nargs="?", metavar="CALL_ID", help=CALL)
    approve.add_argument("--call", dest="call_id", metavar="CALL_ID", help=CALL)
    approve.add_argument("--args", type=json_object,
                         help="edited arguments as a JSON object: only those that change, the rest kept as the model sent them")
    approve.add_argument("--set", dest="changes", type=set_pair, action="append", metavar="KEY=VALUE",
                         help="change one argument (repeatable): the value as JSON when it parses (90, true, "
                              "[1, 2]), else as text; the rest kept as the call has them")
    approve.add_argument("--comment", help="why, kept in the audit and shown to the model")
    approve.add_argument("--by", help=BY)

    reject = commands.add_parser("reject", help="reject a pending call with a reason")
    reject.add_argument("session", help=SESSION)
    reject.add_argument("call", nargs="?", metavar="CALL_ID", help=CALL)
    reject.add_argument("--call", dest="call_id", metavar="CALL_ID", help=CALL)
    reject.add_argument("--reason", help="why not, kept in the audit and shown to the model")
    reject.add_argument("--by", help=BY)

    answer = commands.add_parser("answer", help="answer a pending question (text, or a JSON object for forms)")
    answer.add_argument("session", help=SESSION)
    answer.add_argument("answer", help="the answer as one argument (quote it), or a JSON object for a form")
    # The answer is free text, so a call id cannot sit beside it without being guessed at.
    answer.add_argument("--call", dest="call_id", metavar="CALL_ID", help="the question's call id; " + CALL_LEFT_OUT)
    answer.add_argument("--by", help=BY)
    answer.extra_words_hint = ("the answer is one argument (quote it: \"next friday\"); name the question with "
                               "--call CALL_ID (answer SESSION --call call_3 Shanghai)")

    cancel = commands.add_parser("cancel", help="stop the session; pending calls are cancelled")
    cancel.add_argument("session", help=SESSION)
    cancel.add_argument("--reason", help="why, kept in the audit")

    chat = commands.add_parser("chat", help="an interactive chat that reattaches to its session")
    chat.add_argument("--session", default="chat", help="the session to start or reattach to (default: chat)")
    chat.add_argument("--by", default="you", help="who you are in the session's audit (default: you)")

    inbox = commands.add_parser("inbox", help="every call waiting for a person, across sessions, oldest first")
    inbox.add_argument("--for", dest="person", help="only what this person may decide")
    inbox.add_argument("--claimed", action="store_true", help="with --for: also what others have claimed")
    inbox.add_argument("--task-queue", help="only sessions of this task queue (default: the whole namespace)")
    inbox.add_argument("--limit", type=int, default=100, help="show the oldest N items (default 100; 0: all)")
    inbox.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON rows")
    add_bulk_arguments(inbox)

    stats = commands.add_parser("stats", help="how people decide: per tool, policy rule, door and person over a period")
    stats.add_argument("--since", help="ISO 8601 (default: a week before --until)")
    stats.add_argument("--until", help="ISO 8601 (default: now)")
    stats.add_argument("--tool", help="only this tool")
    stats.add_argument("--person", help="only this person's decisions")
    stats.add_argument("--task-queue", help="only sessions of this task queue (default: the whole namespace)")
    stats.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the figures as JSON")

    watch = commands.add_parser("watch", help="print a session's events as they happen, until it closes")
    watch.add_argument("session", help=SESSION)
    watch.add_argument("--after", type=int, default=0, help="start after this event id (default: all kept)")
    watch.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="one JSON event per line")

    demo = commands.add_parser("demo", help="dev server + worker + chat in one process")
    demo.add_argument("--session", default="demo", help="the session to start or reattach to (default: demo)")
    demo.add_argument("--by", default="you", help="who you are in the session's audit (default: you)")

    commands.add_parser("tools", help="every tool the worker offers (built-in, user, MCP) and its approval policy")

    evidence_command.add_parser(commands)

    delegate = commands.add_parser("delegate", help="hand your decisions to a stand-in while away, through the API "
                                                    "(HITL_API_URL, HITL_API_TOKEN)")
    delegate.add_argument("to", nargs="?", help="the person who decides for you meanwhile")
    delegate.add_argument("--until", help="when it ends: ISO 8601 with a time zone, at most 30 days ahead")
    delegate.add_argument("--tool", action="append", dest="tools", help="only this tool (or glob); repeat for more")
    delegate.add_argument("--list", action="store_true", dest="listing", help="the hand-overs you gave and received")
    delegate.add_argument("--end", metavar="ID", help="end this hand-over")

    serve = commands.add_parser("serve", help="the HTTP API and codec endpoint (HITL_API_HOST:HITL_API_PORT)")
    serve.add_argument("--host", help="default: HITL_API_HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, help="default: HITL_API_PORT or 8000")
    return root


def add_bulk_arguments(inbox: argparse.ArgumentParser) -> None:
    """The inbox's filters, and deciding what they keep at once (hitl/console/bulk.py)."""
    inbox.add_argument("--tool", help="only calls of this tool")
    inbox.add_argument("--arg", action="append", metavar="NAME=VALUE",
                       help="only calls whose argument has this value (as JSON or text); repeatable")
    inbox.add_argument("--requested-by", help="only calls this person asked for")
    inbox.add_argument("--older-than", help="only calls waiting longer than this: 30m, 2h, 1d or an ISO moment")
    inbox.add_argument("--session", dest="filter_session", help="only this session's calls")
    decide = inbox.add_mutually_exclusive_group()
    decide.add_argument("--approve-all", action="store_true", help="approve every call listed, through the API")
    decide.add_argument("--reject-all", action="store_true", help="reject every call listed (with --reason), through the API")
    inbox.add_argument("--reason", help="with --reject-all: why, which the model reads")
    inbox.add_argument("--yes", action="store_true", help="decide without asking first (for scripts)")
    inbox.add_argument("--api", help="the API's URL for --approve-all/--reject-all (default: HITL_API_URL)")


SESSION = "the session's id"
BY = "who you are, as the session's audit records it (asserted: the CLI proves nothing)"
CALL_LEFT_OUT = "may be left out when one waits"
CALL = "the pending call's id (`pending` shows it); " + CALL_LEFT_OUT


def chosen_call(args: argparse.Namespace, command: OneLineParser) -> None:
    """`approve s1 call_2` and `approve s1 --call call_2` are the same; both at once must agree."""
    positional = getattr(args, "call", None)
    if positional and args.call_id and positional != args.call_id:
        command.error(f"two call ids, {positional} and --call {args.call_id}: give one")
    args.call_id = args.call_id or positional


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def set_pair(text: str) -> tuple[str, Any]:
    """`amount=90` -> ("amount", 90); `order_id=A-17` -> ("order_id", "A-17"): JSON when it parses."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (--set k=v, as in --set amount=90)")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def answer_value(text: str) -> Any:
    """A JSON object or list is a form answer; anything else is the text as typed."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, (dict, list)) else text


def payload(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


async def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "demo":
        from hitl.console.demo import run_demo

        return await run_demo(settings, args.session, args.by)
    if args.command == "inbox" and (args.approve_all or args.reject_all):
        from hitl.console.bulk import decide_all

        return await decide_all(args)
    client = await connect(settings)
    if args.command == "chat":
        from hitl.console.chat import Chat

        return await Chat(client, settings.task_queue, args.session, args.by).run()
    if args.command == "inbox":
        return await show_inbox(client, args)
    if args.command == "evidence":
        return await evidence_command.export(client, args, settings.task_queue)
    if args.command == "stats":
        return await show_stats(client, args)
    if args.command == "watch":
        from hitl.console.watch import watch

        return await watch(client, args.session, args.after, args.json)
    # The CLI waits for a worker itself, saying so (`update`), so its decisions are sent even with none polling.
    hitl = HitlClient(client, settings.task_queue, via="cli", started_with="starter.py start", decisions_wait_for_worker=True)
    if args.command == "start":
        return await start(hitl, args)
    session = hitl.session(args.session)
    if args.command in ("pending", "status", "transcript", "audit"):
        result = await session.read(args.command)
        if args.json:
            print_json(result)
        else:
            renderers: dict[str, Callable[[Any], str]] = {
                "pending": describe_pending, "status": render_status, "transcript": render_transcript,
                "audit": lambda r: "\n".join(json.dumps(e) for e in r)}
            say(renderers[args.command](result))
        return 0
    if args.command == "send":
        return await update(session.message(args.text, by=args.by), args.json)
    if args.command == "approve":
        return await approve(session, args)
    if args.command == "reject":
        return await update(session.reject(args.call_id, reason=args.reason, by=args.by), args.json)
    if args.command == "answer":
        answer = answer_value(args.answer)
        if isinstance(answer, str):  # a form of one field (a date, say) takes its value as typed
            answer = await one_field_answer(session, args.call_id, answer)
        return await update(session.answer(answer, args.call_id, by=args.by), args.json)
    if args.command == "cancel":
        return await update(session.cancel(args.reason), args.json)
    raise AssertionError(args.command)


async def approve(session: Session, args: argparse.Namespace) -> int:
    """`--args` and `--set` name only what changes: merged over the arguments of the call they edit,
    what changes shown before the session hears of it, and sent with the digest of the arguments
    they were based on, so a change in between is refused. A call whose arguments cannot be read
    is not approved at all: sent alone, the changes would run the tool with defaults nobody saw."""
    if args.args is None and not args.changes:
        return await update(session.approve(args.call_id, by=args.by, comment=args.comment), args.json)
    changes = {**(args.args or {}), **dict(args.changes or [])}
    try:
        call_id, base, expected = await session.approval_to_edit(args.call_id)
    except (RPCError, WorkflowQueryFailedError, Refused) as error:
        reason = error.reason if isinstance(error, Refused) else str(error)
        say(f"refused: cannot read the call's arguments to edit ({reason}); nothing was sent", file=sys.stderr)
        return 2
    if not args.json:
        for line in args_diff(base, {**base, **changes}) or ["(the same as the model's arguments)"]:
            say(f"edit: {line}")
    return await update(session.approve(call_id, by=args.by, args={**base, **changes}, expected_args_sha256=expected,
                                        comment=args.comment), args.json)


async def one_field_answer(session: Session, call_id: str | None, text: str) -> Any:
    """`answer s1 2026-12-24` to a question whose form has one field: {"date": "2026-12-24"}, which the
    session checks against the field's type. Any other question takes the text itself."""
    try:
        pending = await session.read("pending")
    except (RPCError, WorkflowQueryFailedError):
        return text  # the session says why when it receives the answer
    questions = [item for item in pending if item["kind"] == "question" and call_id in (None, item["call_id"])]
    if len(questions) == 1 and len(questions[0].get("fields") or []) == 1:
        return {questions[0]["fields"][0]["name"]: text}
    return text


async def show_inbox(client: Client, args: argparse.Namespace) -> int:
    from hitl.client.inbox import InboxUnavailable, read_inbox
    from hitl.client.inbox_filters import FilterError, argument_pair, filter_of
    from hitl.console.inbox import inbox_json, render_inbox, unreadable_line

    try:
        wanted = filter_of(tool=args.tool, args=dict(argument_pair(pair) for pair in args.arg or []),
                           requested_by=args.requested_by, older_than=args.older_than, session=args.filter_session)
        inbox = await read_inbox(client, task_queue=args.task_queue, person=args.person, show_claimed=args.claimed,
                                 limit=args.limit or None)
    except (InboxUnavailable, FilterError) as error:
        say(f"error: {error}", file=sys.stderr)
        return 1
    inbox = inbox.model_copy(update={"items": wanted.kept(inbox.items)})
    if args.json:
        print_json(inbox_json(inbox))
    else:
        say(render_inbox(inbox, args.person))
    if inbox.unreadable:
        say(unreadable_line(inbox), file=sys.stderr)
    return 0


# How long a decision or a message waits for the session's answer: a worker takes it in
# milliseconds; none at all leaves the Update waiting in Temporal, and the person should know.
UPDATE_WAIT_SECONDS = float(os.environ.get("HITL_CLI_WAIT_SECONDS") or 120)
UPDATE_NOTICE_SECONDS = min(10.0, UPDATE_WAIT_SECONDS / 2)  # when it says it is still waiting


async def show_stats(client: Client, args: argparse.Namespace) -> int:
    from hitl.client.decisions import PeriodError, period, stats_between
    from hitl.console.stats import render_stats
    from workflows.policy import PolicyError, policy_from_env

    try:
        since, until = period(args.since, args.until)
        policy = policy_from_env()
    except (PeriodError, PolicyError) as error:
        say(f"error: {error}", file=sys.stderr)
        return 2
    stats = await stats_between(client, since, until, policy=policy, tool=args.tool, person=args.person,
                                task_queue=args.task_queue)
    if args.json:
        print_json(stats.model_dump(mode="json"))
    else:
        say(render_stats(stats))
    return 0


async def start(hitl: HitlClient, args: argparse.Namespace) -> int:
    options = payload(args, "model", "system_prompt", "max_steps",
                      "approval_timeout_seconds", "answer_timeout_seconds", "idle_timeout_seconds")
    if args.tools:
        options["tools"] = [name.strip() for name in args.tools.split(",") if name.strip()]
    session_id = args.session or f"session-{uuid.uuid4().hex[:8]}"
    try:
        await hitl.start(args.message, session_id=session_id, by=args.by, **options)
    except WorkflowAlreadyStartedError:
        say(f"error: session {session_id} already exists and is still open: talk to it with "
            f"`send {session_id} ...`, or choose another id", file=sys.stderr)
        return 1
    if args.json:
        print_json({"session_id": session_id})
    else:
        say(f"started session {session_id}")
    return 0


async def update(sending_decision: Awaitable[Decision], as_json: bool) -> int:
    """A decision or message sent through the client, waited for with word to the person while no
    worker takes it, and its answer (or the session's refusal) printed."""
    sending = asyncio.ensure_future(sending_decision)
    try:
        done, _ = await asyncio.wait({sending}, timeout=UPDATE_NOTICE_SECONDS)
        if not done:
            say(f"(no answer from the session yet: waiting up to {UPDATE_WAIT_SECONDS:g} s for a worker to take it)",
                file=sys.stderr)
        result = (await asyncio.wait_for(sending, UPDATE_WAIT_SECONDS - UPDATE_NOTICE_SECONDS)).as_sent()
    except (asyncio.TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):  # the latter: the SDK's, once cancelled
        say(f"error: the session did not answer within {UPDATE_WAIT_SECONDS:g} s: is a worker running "
            "(`python worker.py`, on this task queue)? The request waits in Temporal and may still be applied "
            "when a worker takes the session: look at `status` before you send it again", file=sys.stderr)
        return 1
    except Refused as refused:
        if as_json:
            print_json({"accepted": False, "reason": refused.reason})
        else:
            say(f"refused: {refused.reason}", file=sys.stderr)
        return 2
    if as_json:
        print_json(result)
    else:
        say(", ".join(f"{k}={v}" for k, v in result.items()))
    return 0


def main() -> int:
    root = parser()
    args = root.parse_args()
    if args.command in ("approve", "reject"):
        chosen_call(args, root.command_parser(args))
    if args.command == "serve":
        from hitl.api.app import serve
        from hitl.startup import api_address, port_problem, tokens_warning

        host, port = api_address(args.host, args.port)
        if problem := port_problem(host, port):
            print(problem, file=sys.stderr)
            return 1
        if warning := tokens_warning():
            print(warning, file=sys.stderr)
        serve(host, port)
        return 0
    if args.command == "delegate":
        from hitl.console.stand_ins import DelegateError, delegate

        try:
            print(delegate(args.to, args.until, args.tools, args.listing, args.end))
        except DelegateError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        return 0
    if args.command == "tools":
        from hitl.console.tools import list_tools

        return asyncio.run(list_tools(args.json))
    if args.command == "evidence":
        done = evidence_command.offline(args)
        if done is not None:
            return done
        if problem := evidence_command.export_problem(args):
            root.command_parser(args).error(problem)
    settings = Settings.from_env()
    if args.command == "demo" and (warning := model_warning()):  # the demo runs a worker; so does worker.py
        print(warning, file=sys.stderr)
    try:
        telemetry.start("hitl-starter", None)
        return asyncio.run(run(args, settings))
    except telemetry.TelemetryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (RPCError, NoWorker) as error:
        say(f"error: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:
        if "Failed client connect" not in str(error):
            raise
        say(f"error: {unreachable(settings, error)}", file=sys.stderr)
        return 1
    except KeyError as error:
        if not (sealed := sealed_answer(error)):
            raise
        say(f"error: {sealed}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        telemetry.flush()


def command_line() -> None:
    """`python starter.py` and the installed `hitl` command."""
    exit_with(main)
