"""`starter.py evidence`: export a bundle, verify one, make a signing key.

    starter.py evidence key -o evidence.key          a key pair (evidence.key, evidence.key.pub)
    starter.py evidence --session ID [--tree] -o F   one session (and the sessions below it)
    starter.py evidence --since ISO [--until ISO] -o F   everything decided in a period
    starter.py evidence verify F --public-key evidence.key.pub

Exporting reads Temporal and signs with HITL_EVIDENCE_KEY; verifying and making a key read
nothing but the files named.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hitl.console.render import say
from hitl.evidence.bundle import (
    EvidenceError, load_private_key, load_public_key, new_key, verify_bundle, write_bundle,
)


def instant(text: str) -> datetime:
    """An ISO time; without a zone it is UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO time: {text!r} (e.g. 2026-12-01 or 2026-12-01T09:00+01:00)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def add_parser(commands: Any) -> None:
    evidence = commands.add_parser("evidence", help="export a signed, hash-chained record of decisions; verify one",
                                   description=__doc__.splitlines()[0])
    evidence.add_argument("--session", help="the session to export")
    evidence.add_argument("--tree", action="store_true", help="with --session: the sessions below it too")
    evidence.add_argument("--since", type=instant, help="everything decided from this time (ISO)")
    evidence.add_argument("--until", type=instant, help="with --since: up to this time (default: now)")
    evidence.add_argument("-o", "--output", help="the bundle file to write")
    actions = evidence.add_subparsers(dest="evidence_action", metavar="ACTION")
    verify = actions.add_parser("verify", help="check a bundle with the operator's public key alone")
    verify.add_argument("bundle", help="the bundle file")
    verify.add_argument("--public-key", required=True, help="the PEM public key (`evidence key` wrote it as KEY.pub)")
    key = actions.add_parser("key", help="make an Ed25519 key pair for HITL_EVIDENCE_KEY")
    key.add_argument("-o", "--output", dest="key_file", required=True, help="the private key file (KEY.pub beside it)")


def offline(args: argparse.Namespace) -> int | None:
    """`verify` and `key`, which need no Temporal; None for an export."""
    try:
        if args.evidence_action == "verify":
            return verify(args.bundle, args.public_key)
        if args.evidence_action == "key":
            return make_key(args.key_file)
    except EvidenceError as error:
        say(f"error: {error}", file=sys.stderr)
        return 2
    return None


def verify(path: str, public_key: str) -> int:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise EvidenceError(f"{path}: cannot read it: {error.strerror or error}") from None
    verdict = verify_bundle(text, load_public_key(public_key))
    if verdict.intact:
        say(f"intact: {verdict.records} records, signed by this key")
        return 0
    say(f"NOT intact: {verdict.problem}", file=sys.stderr)
    return 1


def make_key(path: str) -> int:
    private, public = new_key()
    target = Path(path)
    if target.exists():
        raise EvidenceError(f"{path} exists: a key is not overwritten (choose another name)")
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(private)
    Path(f"{path}.pub").write_bytes(public)
    say(f"wrote {path} (private: set HITL_EVIDENCE_KEY={path}) and {path}.pub (give it to the auditor)")
    return 0


def export_problem(args: argparse.Namespace) -> str | None:
    if (args.session is None) == (args.since is None):
        return "give --session ID or --since TIME (one of them)"
    if args.tree and args.session is None:
        return "--tree goes with --session"
    if args.until is not None and args.since is None:
        return "--until goes with --since"
    if not args.output:
        return "give the bundle's file with -o FILE"
    if not os.environ.get("HITL_EVIDENCE_KEY", "").strip():
        return "HITL_EVIDENCE_KEY is not set: the bundle is signed with it (`starter.py evidence key -o FILE` makes one)"
    return None


def unwritable(path: str) -> str | None:
    """Why the bundle could not be written at `path`, asked before Temporal is read for it."""
    target = Path(path)
    if target.is_dir():
        return f"{path} is a folder: give the bundle's file"
    if not target.parent.is_dir():
        return f"{path}: the folder {target.parent} does not exist"
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"{path}: not writable"
    return None


async def export(client: Any, args: argparse.Namespace, task_queue: str) -> int:
    from hitl.evidence.gather import gather

    try:
        if problem := unwritable(args.output):
            raise EvidenceError(problem)
        key = load_private_key(os.environ["HITL_EVIDENCE_KEY"].strip())
    except EvidenceError as error:
        say(f"error: {error}", file=sys.stderr)
        return 2
    until = args.until or (datetime.now(timezone.utc) if args.since else None)
    records = await gather(client, task_queue=task_queue, session=args.session, tree=args.tree, since=args.since, until=until)
    scope: dict[str, Any] = ({"session": args.session, "tree": args.tree} if args.session
                             else {"since": args.since.isoformat(), "until": until.isoformat() if until else None})
    try:
        Path(args.output).write_text(write_bundle(records, key, scope), encoding="utf-8")
    except OSError as error:
        say(f"error: {args.output}: cannot write it: {error.strerror or error}", file=sys.stderr)
        return 2
    say(f"wrote {args.output}: {len(records)} records, signed; check it with "
        f"`starter.py evidence verify {args.output} --public-key KEY.pub`")
    return 0
