#!/usr/bin/env bash
# The external controllers' hand-over, measured on real etcd and real
# machines of the local provider (BENCHMARKS.md §4): ROUNDS runs of
# crates/drover/tests/e2e_external.rs (two `drover controller --external`,
# the acting one kill -9ed mid-roll), each printing when the lease lapsed
# after the kill, and how long after the lapse the standby held the term
# and started its first step (the first action). Prints every run and
# the medians. Usage: scripts/bench-handover.sh [ROUNDS]   (default 5; root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
cargo test -p drover --test e2e_external --no-run
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for _ in $(seq "$rounds"); do
  out=$(cargo test -q -p drover --test e2e_external -- --nocapture 2>&1) || {
    echo "$out" | tail -40; echo "a run failed" >&2; exit 1; }
  echo "$out" | grep -o 'HANDOVER.*' | tee -a "$log"
done
python3 - "$log" <<'PY'
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("HANDOVER")]
def secs(v):
    m = re.match(r"([\d.]+)(ms|s|µs)", v)
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n / 1e6 if m.group(2) == "µs" else n
lapse = [secs(re.search(r"lapsed Some\(([^)]*)\)", r).group(1)) for r in rows]
held = [secs(re.search(r"term ([\d.]+(?:ms|s|µs)) after", r).group(1)) for r in rows]
first = [int(m.group(1)) / 1000 for r in rows if (m := re.search(r"Some\((\d+)\) ms after", r))]
print(f"runs {len(rows)}: kill -> lease lapsed median {statistics.median(lapse):.2f} s; "
      f"lapse -> term held median {statistics.median(held):.2f} s (max {max(held):.2f}); "
      f"lapse -> first step started median {statistics.median(first):.2f} s (max {max(first):.2f})")
PY
