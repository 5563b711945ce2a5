#!/usr/bin/env bash
# Re-resolve the locked dependency set from pyproject.toml:
#   scripts/lock.sh                      keep every pin that still satisfies pyproject.toml
#   scripts/lock.sh --upgrade            move every package to its newest allowed release
#   scripts/lock.sh --upgrade-package temporalio   move one package
# Writes requirements.lock (what the worker and API run: the core and every door, the `all`
# extra) and requirements-test.lock (the same plus the test extra), for every platform
# and Python >= 3.10, with the sha256 of every file pip may install.
set -euo pipefail
cd "$(dirname "$0")/.."
uv="${UV:-uv}"
if ! command -v "$uv" >/dev/null; then
  [ -x .lock-tools/bin/uv ] || { python3 -m venv .lock-tools && .lock-tools/bin/pip install -q uv; }
  uv=.lock-tools/bin/uv
fi
common=(--universal --python-version 3.10 --generate-hashes --no-header --quiet "$@")
"$uv" pip compile pyproject.toml --extra all "${common[@]}" -o requirements.lock
"$uv" pip compile pyproject.toml --extra test "${common[@]}" -o requirements-test.lock
echo "wrote requirements.lock and requirements-test.lock; run ./test.sh, then commit them with pyproject.toml"
