#!/usr/bin/env bash
# A benchmark of this tree against the same benchmark built from another
# commit, run alternately so both see the same machine (it is shared and its
# speed drifts): the fair way to say "faster than before".
#
#   scripts/bench-ab.sh REV [ROUNDS] [SIZE]       # the planner at SIZE members, e.g. 46ee381 12 100000
#   scripts/bench-ab.sh REV [ROUNDS] "SCENARIO"   # a simulated rollout, e.g. 14a9f6f 5 "1000 workers"
#
# For the planner, the other commit gets this tree's planner fixture
# (crates/bench/benches/drover/planner.rs), so both plan the same input.
# Prints, per build, the median over rounds of each run's figure (the
# planner's CPU median in ms and its fastest pass; a rollout's seconds and
# ratio to its minimum) and every run's figure.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/bench-ab.sh REV [ROUNDS] [SIZE|SCENARIO]  (e.g. scripts/bench-ab.sh 46ee381 12 100000, or 14a9f6f 5 \"1000 workers\")"
(($# >= 1 && $# <= 3)) || { echo "$usage" >&2; exit 2; }
rev=$1
rounds=${2:-7}
size=${3:-100000}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, got '$rounds'" >&2; exit 2; }
[ -n "$size" ] || { echo "SIZE|SCENARIO must not be empty" >&2; exit 2; }
git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "REV '$rev' is not a commit here" >&2; exit 2; }

work=$(mktemp -d)
cleanup() {
  git worktree remove --force "$work/tree" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The bench binary a `cargo bench --no-run` just built (its path is printed).
build() {
  cargo bench -q -p drover-bench --bench drover --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "drover":
        print(m["executable"])'
}

git worktree add -q --detach "$work/tree" "$rev"
cp crates/bench/benches/drover/planner.rs "$work/tree/crates/bench/benches/drover/planner.rs"
cp "$(build)" "$work/here"
(cd "$work/tree" && CARGO_TARGET_DIR="$PWD/../target" build) | xargs -I{} cp {} "$work/there"

# One run of build $1: "<figure> <second figure>" (planner: CPU median ms,
# fastest pass ms; rollout: seconds, ratio).
one() {
  if [[ $size =~ ^[0-9]+$ ]]; then
    "$work/$1" planner --only "$size" | awk -F'|' -v n="$size" '$2 + 0 == n { print $5, $4 }'
  else
    "$work/$1" rollout --runs 1 --only "$size" | awk -F'|' 'NR > 1 && $3 ~ /[0-9]/ { print $4 + 0, $5 + 0; exit }'
  fi
}
for r in $(seq "$rounds"); do
  for b in here there; do
    one "$b" >>"$work/$b.txt"
  done
done
for b in here there; do
  label=$([ "$b" = here ] && echo "this tree" || echo "$rev")
  if [[ $size =~ ^[0-9]+$ ]]; then
    sort -n "$work/$b.txt" | awk -v l="$label" -v n="$size" '
      { cpu[NR] = $1; all = all sprintf("%.2f ", $1); if (min == "" || $2 < min) min = $2 }
      END { printf "%s, N = %s: median CPU ms %.2f, fastest pass %.2f ms, runs: %s\n", l, n, cpu[int((NR + 1) / 2)], min, all }'
  else
    sort -n "$work/$b.txt" | awk -v l="$label" -v n="$size" '
      { t[NR] = $1; r[NR] = $2; all = all sprintf("%.2f ", $1) }
      END { printf "%s, %s: median %.2f s, ratio %.3f, runs s: %s\n", l, n, t[int((NR + 1) / 2)], r[int((NR + 1) / 2)], all }'
  fi
done
