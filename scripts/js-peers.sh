#!/usr/bin/env bash
# Run by test.sh: install the JavaScript peers the tests talk to (tests/js: a
# certified OpenID provider, the official AG-UI client) from their lock file,
# again only when the lock file has changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
stamp="node_modules/.installed"
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  echo "installing the tests' JavaScript peers (tests/js)..." >&2
  if ! npm ci --no-audit --no-fund > npm-install.log 2>&1; then
    cat npm-install.log >&2
    echo "npm ci failed; the log above is also in tests/js/npm-install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
