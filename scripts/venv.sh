#!/usr/bin/env bash
# Run by demo.sh and test.sh: make .venv and install the project into it,
# again only when pyproject.toml has changed since the last install.
# Usage: scripts/venv.sh [extra]   (extra: an optional-dependency group, e.g. test)
# Callers run it rather than source it, so their own arguments never reach it;
# the body runs in a subshell, so even sourcing it leaves the caller's shell as it was.
(
  set -euo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  extra="${1:-}"
  spec="."
  [ -n "$extra" ] && spec=".[$extra]"
  stamp=".venv/.installed${extra:+-$extra}"
  if [ ! -x .venv/bin/python ]; then
    echo "setting up .venv (first run only)..." >&2
    python3 -m venv .venv
  fi
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "installing the project into .venv..." >&2
    if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e "$spec"; } \
        > .venv/install.log 2>&1; then
      cat .venv/install.log >&2
      echo "installation failed; the log above is also in .venv/install.log" >&2
      exit 1
    fi
    # An install with an extra installs the project itself too.
    touch "$stamp" .venv/.installed
  fi
)
