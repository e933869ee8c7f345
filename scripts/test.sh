#!/usr/bin/env bash
# Runs every drover test, installing what they need first.
# Real-engine tests start their own dockerd/etcd processes on loopback and stop them by PID.
#
# The end-to-end suites (crates/drover/tests/e2e_*.rs) take minutes each, mostly
# waiting on engines and timers, and each uses its own loopback range: they run
# side by side, next to the rest of the suite, with their output kept in
# target/test-logs/ and printed when one fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --no-run

logs=target/test-logs
rm -rf "$logs" && mkdir -p "$logs"
e2e=()
others=()
for f in crates/drover/tests/*.rs; do
  t=$(basename "$f" .rs)
  case "$t" in
    e2e_*) e2e+=("$t") ;;
    *) others+=(--test "$t") ;;
  esac
done
declare -A pid
for t in "${e2e[@]}"; do
  cargo test -p drover --locked --test "$t" >"$logs/$t.log" 2>&1 &
  pid[$t]=$!
done

status=0
cargo test --workspace --locked --exclude drover || status=1
cargo test -p drover --locked --bins "${others[@]}" || status=1

for t in "${e2e[@]}"; do
  if wait "${pid[$t]}"; then
    echo "e2e $t: ok ($(grep -h 'test result' "$logs/$t.log" | tail -1))"
  else
    echo "e2e $t: FAILED; its output:"
    cat "$logs/$t.log"
    status=1
  fi
done
exit "$status"
