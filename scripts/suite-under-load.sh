#!/usr/bin/env bash
# Run the CI job (.ci/run: a fresh install and the README's test command) on a
# fresh clone of this repository, RUNS times in a row, with a busy-looping CPU
# hog beside each run. The suite must be green every time, not only on a quiet
# machine: a test that fails here depends on timing, and that is a bug.
# Usage: scripts/suite-under-load.sh [runs] [results-dir]   (defaults: 3, /tmp/suite-under-load)
# Each run's output is in results-dir/run-N.log; results-dir/summary.txt has
# one line a run: commit, exit code, minutes, and pytest's last line.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-3}"
out="${2:-/tmp/suite-under-load}"
mkdir -p "$out"
hog=""
stop_hog() { [ -n "$hog" ] && kill "$hog" 2>/dev/null; hog=""; }
trap stop_hog EXIT
failed=0
for n in $(seq 1 "$runs"); do
  clone="$(mktemp -d /tmp/suite-under-load-clone.XXXXXX)"
  git clone -q "$repo" "$clone"
  commit="$(git -C "$clone" rev-parse --short HEAD)"
  # One core spinning for the whole run: the suite shares the machine with it.
  sh -c 'while :; do :; done' &
  hog=$!
  started=$(date +%s)
  (cd "$clone" && .ci/run) > "$out/run-$n.log" 2>&1
  rc=$?
  stop_hog
  minutes=$(( ($(date +%s) - started + 30) / 60 ))
  last="$(grep -E '(passed|failed|error)' "$out/run-$n.log" | tail -1)"
  echo "run $n: commit $commit, exit $rc, $minutes min, $last" | tee -a "$out/summary.txt"
  if [ "$rc" -eq 0 ]; then rm -rf "$clone"; else failed=1; echo "  kept $clone" | tee -a "$out/summary.txt"; fi
done
exit "$failed"
