#!/usr/bin/env bash
# Set up (first run only) and run the whole test suite against a real Temporal
# dev server that the tests start from the installed `temporal` binary.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/venv.sh test
./scripts/js-peers.sh
exec .venv/bin/python -m pytest "$@"
