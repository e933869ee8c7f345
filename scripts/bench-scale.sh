#!/usr/bin/env bash
# drover on real engines at scale (issue 37, items 3 and 4): for each size,
# 3 managers + W workers on the local provider (a real dockerd per machine,
# a controller next to every manager, desired state in a local etcd), on a
# fresh cluster each run:
#   1. bootstrap: `drover apply -f v1 --wait` from nothing (etcd running,
#      no machine) until the cluster converged on revision 1, as `drover
#      demo up` does it (the same procedure, with this benchmark's spec);
#   2. roll: `drover apply -f v2 --wait`, v2 changing an engine label on
#      every member (all replaced): workers `max_in_flight: 10`,
#      `canaries: 0`; managers one at a time (pets on fixed addresses, with
#      the demo's spare slot); `watch: 1s` in both groups;
#   3. the roll's engine-bound minimum from the audit log (`drover events`):
#      per wave its slowest operation's steps (each a side effect on the
#      engines: provision = engine start, boot script and join; drain;
#      demote; leave; destroy; node rm) plus the declared watch, summed over
#      the waves (scripts/bench_scale.py, `minimum`); ratio = roll ÷ minimum;
#   4. the controllers' CPU seconds per pass and resident memory, during
#      the bootstrap and the roll: /proc/PID/stat and /proc/PID/status of
#      every controller of this benchmark, and `drover_passes_total` from
#      each one's metrics endpoint, sampled every second.
# "Nodes" = 3 managers + W workers: the default sizes 2 17 60 are 5, 20 and
# 63 nodes (the headline: 3 + 60). Prints a Markdown table per size
# (medians over the runs, with the runs), writes RESULTS/scale.tsv, and
# draws the growth curves (time, CPU, memory against nodes) with plotters
# (`scripts/bench.sh real-figures`) into FIGURES (default docs/figures).
#
#   sudo scripts/bench-scale.sh [--runs K] [--figures DIR] [WORKERS ...]   # default: --runs 1, 2 17 60
#   sudo scripts/bench-scale.sh report RESULTS [--figures DIR]             # the tables and figures again, from a run's files
#   sudo scripts/bench-scale.sh down                                       # stop everything it started, remove its files
#
# Uses only $DROVER_BENCH_NET.x (managers, etcd: default 127.0.97) and
# $DROVER_BENCH_POOL_NET.20-.250 (workers: default 127.0.98), and
# DROVER_BENCH_DIR (default /tmp/drover-bench-scale): it can share the host
# with the test suite and scripts/bench-real.sh. Needs root (dockerd),
# etcd, python3, curl. 60 workers: about 10 GB of memory (swarm-facts.md:
# ~125 MB an engine in a swarm, plus its containerd), more during the roll.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${DROVER_BENCH_DIR:-/tmp/drover-bench-scale}
NET=${DROVER_BENCH_NET:-127.0.97}
POOL_NET=${DROVER_BENCH_POOL_NET:-127.0.98}
ETCD_PORT=23795
export DROVER_STORE=etcd://$NET.1:$ETCD_PORT
export DROVER_LOCAL_DIR=$BASE/machines
# 231 addresses: the workers and their replacements (10 in flight) with
# room to spare; the managers' fixed addresses are in $NET.
export DROVER_LOCAL_POOL=$POOL_NET.20-$POOL_NET.250
export DROVER_LOG=${DROVER_LOG:-warn}
WATCH=1
MAX_IN_FLIGHT=10
CANARIES=0

# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

usage() {
  echo "usage: scripts/bench-scale.sh [--runs K] [--figures DIR] [WORKERS ...] | report RESULTS [--figures DIR] | down${1:+ ($1)}" >&2
  exit 2
}

# --- arguments --------------------------------------------------------------
if [ "${1:-}" = down ]; then
  [ $# = 1 ] || usage "down takes no argument"
  bench_down "$BASE"
  exit 0
fi
MODE=run
RESULTS=""
if [ "${1:-}" = report ]; then
  MODE=report
  RESULTS=${2:-}
  [ -d "$RESULTS" ] || usage "report needs the directory of a run's results"
  shift 2
fi
RUNS=1
FIGURES=docs/figures
SIZES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage "--runs needs a positive count"; RUNS=$2; shift 2 ;;
    --figures) [ -n "${2:-}" ] || usage "--figures needs a directory"; FIGURES=$2; shift 2 ;;
    *) [[ $1 =~ ^[1-9][0-9]*$ ]] || usage "a size is a positive worker count, got '$1'"; SIZES+=("$1"); shift ;;
  esac
done
[ "$MODE" = report ] && [ ${#SIZES[@]} -gt 0 ] && usage "report takes no sizes"
[ ${#SIZES[@]} -gt 0 ] || SIZES=(2 17 60)

# The tables (stdout, and RESULTS/report.md) and the growth pictures of a
# run's results.
report() {
  python3 scripts/bench_scale.py report "$RESULTS" | tee "$RESULTS/report.md"
  scripts/bench.sh real-figures "$RESULTS/scale.tsv" "$FIGURES"
  echo "Figures: $FIGURES/real-growth-{time,cpu,memory}.svg"
}
if [ "$MODE" = report ]; then report; exit 0; fi

[ "$(id -u)" = 0 ] || { echo "bench-scale starts dockerd processes: run it as root" >&2; exit 2; }
for bin in etcd dockerd python3 curl; do
  command -v "$bin" >/dev/null || { echo "bench-scale needs $bin" >&2; exit 2; }
done

# --- the host's limits --------------------------------------------------------
# Each engine (dockerd + its containerd) holds descriptors (~40 idle),
# inotify instances and threads; the controllers inherit this shell's
# limits through the machines they start. Per-process limits are raised for
# this shell and its children only; kernel settings are raised when lower
# and put back on exit.
declare -A SYSCTL_SAVED=()
raise_sysctl() {
  local key=$1 want=$2 have
  have=$(sysctl -n "$key")
  [ "$have" -ge "$want" ] && return 0
  if sysctl -qw "$key=$want"; then
    SYSCTL_SAVED[$key]=$have
    echo "raised $key from $have to $want (restored on exit)"
  else
    echo "warning: could not raise $key from $have to $want: engines may fail to start" >&2
  fi
}
restore_sysctl() {
  local key
  for key in "${!SYSCTL_SAVED[@]}"; do sysctl -qw "$key=${SYSCTL_SAVED[$key]}" || true; done
  SYSCTL_SAVED=()
}
raise_limits() {
  local max=${SIZES[0]} w
  for w in "${SIZES[@]}"; do [ "$w" -gt "$max" ] && max=$w; done
  # Engines at once: every node and the roll's replacements.
  local engines=$((2 * (max + 3) + MAX_IN_FLIGHT))
  ulimit -Hn 1048576 2>/dev/null || true
  ulimit -n "$(ulimit -Hn)"
  ulimit -u unlimited 2>/dev/null || true
  raise_sysctl fs.inotify.max_user_instances $((engines * 16 + 1024))
  raise_sysctl fs.inotify.max_user_watches $((engines * 8192 + 65536))
  # Measured: ~11 threads a dockerd and 8 its containerd, idle; 64 leaves room.
  raise_sysctl kernel.pid_max $((engines * 64 + 4096))
  raise_sysctl kernel.threads-max $((engines * 64 + 4096))
}

# --- one run ------------------------------------------------------------------
spec() {
  local release=$1 workers=$2
  cat <<YAML
groups:
- name: managers
  role: manager
  allocation:
    logical_ids: [$NET.11, $NET.12, $NET.13]
    # As the demo's: a temporary 4th manager keeps fault tolerance 1.
    spare_ids: [$NET.14]
  instance: {provider: local}
  flavor: {engine_labels: {release: "$release"}}
  update: {watch: ${WATCH}s}
  health: {startup_timeout: 120s}
- name: workers
  role: worker
  allocation: {size: $workers}
  instance: {provider: local}
  flavor: {engine_labels: {release: "$release"}}
  update: {watch: ${WATCH}s, max_in_flight: $MAX_IN_FLIGHT, canaries: $CANARIES}
  health: {startup_timeout: 120s}
YAML
}

SAMPLER=""
SAMPLE_STOP=""
# Samples the controllers every second into $1 until stop_sampler; returns
# once the first sample is taken (the roll's baseline).
start_sampler() {
  SAMPLE_STOP=$1.stop
  rm -f "$SAMPLE_STOP"
  python3 scripts/bench_scale.py sample "$BASE" "$1" "$SAMPLE_STOP" &
  SAMPLER=$!
  for _ in $(seq 50); do [ -s "$1" ] && return 0; sleep 0.1; done
}
stop_sampler() {
  [ -n "$SAMPLER" ] || return 0
  touch "$SAMPLE_STOP"
  wait "$SAMPLER" 2>/dev/null || true
  SAMPLER=""
}

# Runs `drover apply -f $1 --wait`, its output into $2; prints the start
# and end (ms) on success.
timed_apply() {
  local file=$1 log=$2 t0 t1
  t0=$(date +%s%3N)
  if ! "$BIN" apply -f "$file" --wait --timeout 30m >"$log" 2>&1; then
    echo "drover apply -f $file failed:" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
  t1=$(date +%s%3N)
  echo "$t0 $t1"
}

# Keeps what explains a failed run: the controllers' logs and the status.
keep_diagnostics() {
  local tag=$1 log
  for log in "$BASE"/machines/instances/*/controller.log; do
    [ -f "$log" ] && cp "$log" "$RESULTS/failed-$tag-$(basename "$(dirname "$log")").log"
  done
  "$BIN" status >"$RESULTS/failed-$tag-status.txt" 2>&1 || true
}

run_once() {
  local workers=$1 run=$2 tag=$1-$2 boot roll printed
  bench_down "$BASE"
  mkdir -p "$BASE"
  bench_etcd "$BASE" "$NET.1" "$ETCD_PORT" $((ETCD_PORT + 10))
  spec v1 "$workers" >"$BASE/v1.yaml"
  spec v2 "$workers" >"$BASE/v2.yaml"

  echo "== $((workers + 3)) nodes (3 + $workers), run $run/$RUNS: bootstrap"
  start_sampler "$RESULTS/samples-$tag-boot.jsonl"
  boot=$(timed_apply "$BASE/v1.yaml" "$RESULTS/apply-$tag-boot.log") || { keep_diagnostics "$tag"; return 1; }
  stop_sampler
  printed=$(sed -n 's/^converged on revision 1 after \([0-9.]*\)s$/\1/p' "$RESULTS/apply-$tag-boot.log")
  "$BIN" events --since 1h --output json >"$RESULTS/events-$tag-boot.json"
  sleep 3 # every controller settles on the converged revision

  echo "== $((workers + 3)) nodes (3 + $workers), run $run/$RUNS: roll"
  start_sampler "$RESULTS/samples-$tag-roll.jsonl"
  roll=$(timed_apply "$BASE/v2.yaml" "$RESULTS/apply-$tag-roll.log") || { keep_diagnostics "$tag"; return 1; }
  stop_sampler
  "$BIN" events --since 1h --output json >"$RESULTS/events-$tag-roll.json"
  python3 - "$RESULTS/events-$tag-roll.json" "${roll% *}" <<'PY'
import json, sys
# The store keeps the last 1000 events: the roll's must all be there.
events, start = json.load(open(sys.argv[1])), int(sys.argv[2])
if events and min(e["at_ms"] for e in events) > start:
    sys.exit("the audit log no longer holds the roll's first events: the minimum would be wrong")
PY
  cat >"$RESULTS/$tag.json" <<JSON
{"workers": $workers, "run": $run,
 "boot_start_ms": ${boot% *}, "boot_end_ms": ${boot#* }, "boot_printed_s": ${printed:-null},
 "roll_start_ms": ${roll% *}, "roll_end_ms": ${roll#* },
 "groups": {"managers": {"watch": $WATCH, "max_in_flight": 1, "canaries": 0},
            "workers": {"watch": $WATCH, "max_in_flight": $MAX_IN_FLIGHT, "canaries": $CANARIES}}}
JSON
  bench_down "$BASE"
}

cleanup() {
  local rc=$?
  stop_sampler
  bench_down "$BASE"
  restore_sysctl
  [ "$rc" = 0 ] || echo "bench-scale failed; what it kept: $RESULTS" >&2
}

scripts/setup.sh
# DROVER_BIN: a drover binary already built (skips the release build).
if [ -z "${DROVER_BIN:-}" ]; then
  cargo build -q --release -p drover
fi
BIN=${DROVER_BIN:-$PWD/target/release/drover}
# The controllers run the CLI's own binary (the local provider puts its
# directory first on the machines' PATH).
RESULTS=$(mktemp -d /tmp/drover-bench-scale-results.XXXXXX)
trap cleanup EXIT
trap 'exit 130' INT TERM
raise_limits
for workers in "${SIZES[@]}"; do
  for run in $(seq "$RUNS"); do
    run_once "$workers" "$run"
  done
done
cleanup
trap - EXIT
report
echo "Raw data: $RESULTS"
