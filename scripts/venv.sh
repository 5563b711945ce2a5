#!/usr/bin/env bash
# Run by demo.sh and test.sh: make .venv and install the locked dependency set
# into it, then the project itself, again only when pyproject.toml or the lock
# file has changed since the last install.
# Usage: scripts/venv.sh [extra]   (extra: an optional-dependency group, e.g. test)
# It is run, not sourced, so the caller's own arguments can never reach it.
# The lock files pin every package with its hashes: scripts/lock.sh rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"
lock="requirements${extra:+-$extra}.lock"
stamp=".venv/.installed${extra:+-$extra}"
if [ ! -f "$lock" ]; then
  echo "no $lock for the extra '$extra'; scripts/lock.sh writes the lock files" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "setting up .venv (first run only)..." >&2
  python3 -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  echo "installing $lock and the project into .venv..." >&2
  if ! { .venv/bin/python -m pip install --upgrade pip \
         && .venv/bin/python -m pip install --require-hashes -r "$lock" \
         && .venv/bin/python -m pip install --no-deps -e .; } > .venv/install.log 2>&1; then
    cat .venv/install.log >&2
    echo "installation failed; the log above is also in .venv/install.log" >&2
    exit 1
  fi
  # An install with an extra installs the project itself too.
  touch "$stamp" .venv/.installed
fi
