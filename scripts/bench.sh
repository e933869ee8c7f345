#!/usr/bin/env bash
# drover's simulated benchmarks (issue 7): planner cost, provider API economy
# and memory, controller overhead in simulated rollouts, in release mode.
# Results are Markdown tables on stdout (see BENCHMARKS.md).
#
#   scripts/bench.sh                    # every section, 3 runs of each rollout
#   scripts/bench.sh planner            # one section: planner | economy | rollout
#   scripts/bench.sh rollout --runs 5
#   scripts/bench.sh rollout --only "1000 workers"   # one rollout scenario
#   scripts/bench.sh planner --only 10000          # one planner size
#   scripts/bench.sh planner economy --figures docs/figures   # and the growth pictures (SVG)
#   scripts/bench.sh real-figures TSV DIR   # the pictures of scripts/bench-scale.sh's TSV (runs nothing)
#
# Real engines: scripts/bench-real.sh, at scale scripts/bench-scale.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# cargo runs the benchmark in its crate's directory: a relative
# --figures directory, or real-figures' TSV and directory, is made absolute
# from here (the repository's root).
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    real-figures)
      [ $# = 3 ] || { echo "usage: scripts/bench.sh real-figures TSV DIR" >&2; exit 2; }
      args+=("$1" "$(realpath -m "$2")" "$(realpath -m "$3")"); shift 3 ;;
    --figures) args+=("$1" "$(realpath -m "${2:?--figures needs a directory}")"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
exec cargo bench -q -p drover-bench --bench drover -- "${args[@]}"
