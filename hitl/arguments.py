"""argparse for the product's commands, whose every refusal is one line: what is wrong, and where help is.

argparse prints its usage block before the error, and for `starter.py --bogus` it named the
missing command rather than the option nobody knows. Here the unknown option comes first, then
the message, then which `--help` to read.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn, Sequence

NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class OneLineParser(argparse.ArgumentParser):
    # Set on a command whose free text is one argument: what to say about words past it.
    extra_words_hint: str | None = None

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.command_parser(parsed).refuse_extras(extras)
        return parsed

    def command_parser(self, parsed: argparse.Namespace) -> OneLineParser:
        """The parser of the command `parsed` chose (this one when it has no commands)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(chosen, OneLineParser):
                    return chosen.command_parser(parsed)
        return self

    def refuse_extras(self, extras: list[str]) -> NoReturn:
        options = [word for word in extras if looks_like_option(word)]
        if options:
            self.error(f"unknown option {options[0]}")
        if self.extra_words_hint:
            self.error(f"unexpected {' '.join(extras)!r}: {self.extra_words_hint}")
        self.error(f"unexpected argument{'s' if len(extras) > 1 else ''} {' '.join(extras)!r}")

    def unknown_options(self) -> list[str]:
        """Options given to this parser that it does not know (before its command, if it has commands)."""
        has_commands = any(isinstance(action, argparse._SubParsersAction) for action in self._actions)
        unknown = []
        for word in getattr(self, "_given", []):
            if word == "--":
                break
            if not looks_like_option(word):
                if has_commands:
                    break
                continue
            if word.split("=", 1)[0] not in self._option_string_actions:
                unknown.append(word)
        return unknown

    def error(self, message: str) -> NoReturn:
        if unknown := self.unknown_options():  # argparse would name a missing argument instead
            message = f"unknown option {unknown[0]}"
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` says more)\n")


def looks_like_option(word: str) -> bool:
    return word.startswith("-") and word != "-" and not NEGATIVE_NUMBER.match(word)
