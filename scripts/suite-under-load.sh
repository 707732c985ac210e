#!/usr/bin/env bash
# Runs the whole suite N times in a row (default 10) while four busy loops hold the machine's
# cores, as a loaded CI machine would: the check that no test depends on an idle machine (a
# fixed wait, a start-up budget, a timer that outruns real work). Stops at the first red run
# and prints its failures; the full log of run K is target/under-load/run-K.log.
#
#   scripts/suite-under-load.sh [N]
#
# Needs what `.ci/run` needs (PostgreSQL at TEST_DATABASE_URL, ffmpeg, chromium and
# chromedriver). The busy loops run at the lowest priority (nice 19), so the suite keeps the
# cores it asks for and waits on everything else.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
export TEST_DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
mkdir -p target/under-load
cargo test --locked --no-run >/dev/null 2>&1 || { echo "error: the tests do not build" >&2; exit 1; }

loops=()
for _ in 1 2 3 4; do
  nice -n 19 bash -c 'while :; do :; done' &
  loops+=($!)
done
trap 'kill "${loops[@]}" 2>/dev/null' EXIT

for run in $(seq 1 "$runs"); do
  log=target/under-load/run-$run.log
  started=$(date +%s)
  if cargo test --locked -- --include-ignored >"$log" 2>&1; then
    echo "run $run of $runs: green in $(($(date +%s) - started)) s"
  else
    echo "run $run of $runs: RED in $(($(date +%s) - started)) s ($log)"
    grep -E '^test .* FAILED$|panicked at' "$log" | head -20
    exit 1
  fi
done
echo "the suite was green $runs times in a row under load"
