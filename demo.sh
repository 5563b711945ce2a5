#!/usr/bin/env bash
# Set up (first run only) and start the demo: the embedded Temporal dev server,
# a worker and an interactive chat, in one process. No Docker, no API key.
# Run it again after Ctrl-C to reattach to the same session.
set -euo pipefail
cd "$(dirname "$0")"
usage_error() {  # one line, before anything is installed or started
  echo "./demo.sh: error: $1 (\`./demo.sh --help\` lists the options)" >&2
  exit 2
}
# Only its own options: anything else would reach starter.py, whose usage is not this command's.
set -- "$@" --end-of-options
while [ "$1" != --end-of-options ]; do
  case "$1" in
    -h|--help)
      cat <<'USAGE'
usage: ./demo.sh [--session ID] [--by NAME]

Starts the embedded Temporal dev server (data in .hitl/temporal.db, Web UI on
http://localhost:8233), a worker and a chat in this terminal. The first run
makes .venv and installs the project. Ctrl-C or Ctrl-D leaves the session where
it is; run the same command again to reattach. One demo runs per checkout at a
time (a second one says so and stops).

options:
  --session ID   the session to start or reattach to (default: demo)
  --by NAME      who you are in the session's audit (default: you)

environment:
  OPENAI_API_KEY, OPENAI_BASE_URL, HITL_MODEL   a real model (default: the built-in offline model)
  HITL_WORKSPACE   the folder the tools may touch (default: ./workspace)
  TEMPORAL_ADDRESS a Temporal server to use; when none listens there, the demo starts its own
                   on that port (default: localhost:7233)
  HITL_UI_PORT     the Web UI port of the server the demo starts (default: 8233)

In the chat: /help lists the commands; at a decision type a, e or r.
USAGE
      exit 0
      ;;
    --session|--by)
      [ $# -gt 2 ] && [ "$2" != --end-of-options ] || usage_error "$1 needs a value"
      set -- "$@" "$1" "$2"; shift 2 ;;
    --session=*|--by=*) set -- "$@" "$1"; shift ;;
    -*) usage_error "unknown option $1" ;;
    *) usage_error "unexpected argument '$1'" ;;
  esac
done
shift  # --end-of-options: what is left are the options, checked
./scripts/venv.sh
exec .venv/bin/python starter.py demo "$@"
