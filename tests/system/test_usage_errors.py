"""A command typed wrong says in one line what is wrong and where help is, and does nothing else
(issue 26: `starter.py --bogus` said a command was required, and argparse's usage came first)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from hitl.cli import parser
from tests.support.stack import ROOT, nobody_listens, product_env

MISTYPED = [
    (("starter.py", "--bogus"), "starter.py: error: unknown option --bogus (`starter.py --help` says more)"),
    (("starter.py", "approve", "tour-1", "call_1", "--bogus"),
     "starter.py approve: error: unknown option --bogus (`starter.py approve --help` says more)"),
    (("starter.py", "inbox", "--limit", "many"),
     "starter.py inbox: error: argument --limit: invalid int value: 'many' (`starter.py inbox --help` says more)"),
    (("starter.py",), "starter.py: error: the following arguments are required: COMMAND (`starter.py --help` says more)"),
    (("worker.py", "--bogus"), "worker.py: error: unknown option --bogus (`worker.py --help` says more)"),
]


@pytest.mark.parametrize("argv, line", MISTYPED, ids=[" ".join(argv) for argv, _ in MISTYPED])
def test_a_mistyped_command_is_one_line_and_exit_code_2(argv: tuple[str, ...], line: str) -> None:
    ran = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=product_env(TEMPORAL_ADDRESS=nobody_listens()))
    assert (ran.returncode, ran.stdout, ran.stderr) == (2, "", line + "\n")


def test_every_option_of_every_command_says_what_it_is_for() -> None:
    undocumented = [
        f"{command} {action.option_strings or action.dest}"
        for command, sub in [("starter.py", parser()), *subcommands(parser())]
        for action in sub._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert undocumented == []
    shown = subprocess.run([sys.executable, "starter.py", "approve", "--help"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, env=product_env())
    assert "usage: starter.py approve [-h] [--call CALL_ID]" in shown.stdout and "session [CALL_ID]" in shown.stdout
    for option in ("--comment COMMENT  why", "--by BY            who you are", "CALL_ID            the pending call's id"):
        assert option in shown.stdout, shown.stdout


def subcommands(root: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    return [(f"starter.py {name}", sub) for action in root._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()]
