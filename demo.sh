#!/usr/bin/env bash
# Set up (first run only) and start the demo: the embedded Temporal dev server,
# a worker and an interactive chat, in one process. No Docker, no API key.
# Run it again after Ctrl-C to reattach to the same session.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/venv.sh
exec .venv/bin/python starter.py demo "$@"
