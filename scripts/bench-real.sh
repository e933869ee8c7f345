#!/usr/bin/env bash
# drover on real engines (issue 7, targets 3 and 4): a rolling update of
# 3 managers + 2 workers on the local provider (a real dockerd per machine,
# controllers on the managers, desired state in a local etcd), RUNS times,
# each on a fresh cluster. Reports, as medians over the runs:
#   - the total rollout time;
#   - per step, the engine's part (the side effect's own duration: start a
#     machine and join it, drain, demote, destroy, node rm; and the waits on
#     the swarm: out of the raft, node Ready) versus drover's part (from one
#     step's end, or the swarm showing the condition it waited for, to the
#     next step's start);
#   - the failover gap: from the old leader's self-demotion to the next
#     leader's controller's first action, and how much of it comes after the
#     swarm itself reports the new leader.
# Timestamps come from drover's audit log (`drover events`) and from polling
# `docker node ls` on a manager every 100 ms (the polling adds up to 0.1 s
# to the engine's side).
#
#   scripts/bench-real.sh [RUNS]      # default 3; takes a few minutes per run
#   scripts/bench-real.sh down        # stop everything it started, remove its files
#
# Needs root (dockerd), etcd, python3. Uses only 127.0.95.x-127.0.99.x.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${DROVER_BENCH_DIR:-/tmp/drover-bench-real}
export DROVER_STORE=etcd://127.0.95.1:23791
export DROVER_LOCAL_DIR=$BASE/machines
export DROVER_LOCAL_POOL=127.0.96.20-127.0.96.80
export DROVER_LOG=${DROVER_LOG:-warn}
WATCH_MANAGERS=3
WATCH_WORKERS=2

# Stops every process whose command line names $1 (verified, by PID), then SIGKILL after 10 s.
stop_matching() {
  local needle=$1 pids=() p
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$needle"; then pids+=("${p#/proc/}"); fi
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    local alive=0
    for p in "${pids[@]}"; do [ -d "/proc/$p" ] && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

down() {
  [ -d "$BASE" ] || return 0
  stop_matching "$BASE/machines"
  stop_matching "$BASE/etcd"
  awk -v d="$BASE" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$BASE"
}

if [ "${1:-}" = down ]; then down; exit 0; fi
RUNS=${1:-3}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/bench-real.sh [RUNS|down] (RUNS: a positive count, got '$RUNS')" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench-real starts dockerd processes: run it as root" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-real needs python3 for its report" >&2; exit 2; }

scripts/setup.sh
# DROVER_BIN: a drover binary already built (skips the release build).
if [ -z "${DROVER_BIN:-}" ]; then
  cargo build -q --release -p drover
fi
BIN=${DROVER_BIN:-$PWD/target/release/drover}
RESULTS=$(mktemp -d /tmp/drover-bench-real-results.XXXXXX)
trap 'stop_poller; down' EXIT

spec() {
  cat <<YAML
groups:
- name: managers
  role: manager
  allocation:
    logical_ids: [127.0.95.11, 127.0.95.12, 127.0.95.13]
  instance: {provider: local}
  flavor: {engine_labels: {release: "$1"}}
  update: {watch: ${WATCH_MANAGERS}s}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: local}
  flavor: {engine_labels: {release: "$1"}}
  update: {watch: ${WATCH_WORKERS}s}
YAML
}

# Every 100 ms: "<ms> <node id>:<hostname>:<state>:<manager status> ..." from any manager that answers.
POLLER=""
poll_swarm() {
  while :; do
    local now line="" sock
    now=$(date +%s%3N)
    for sock in "$BASE"/machines/instances/*/sock; do
      [ -S "$sock" ] || continue
      line=$(timeout 2 docker -H "unix://$sock" node ls --format '{{.ID}}:{{.Hostname}}:{{.Status}}:{{.ManagerStatus}}' 2>/dev/null | tr '\n' ' ') || line=""
      [ -n "$line" ] && break
    done
    [ -n "$line" ] && echo "$now $line"
    sleep 0.1
  done
}
stop_poller() {
  if [ -n "$POLLER" ]; then
    kill "$POLLER" 2>/dev/null || true
    wait "$POLLER" 2>/dev/null || true
    POLLER=""
  fi
}

for run in $(seq "$RUNS"); do
  down
  mkdir -p "$BASE"
  nohup etcd --name bench --data-dir "$BASE/etcd" \
    --listen-client-urls http://127.0.95.1:23791 --advertise-client-urls http://127.0.95.1:23791 \
    --listen-peer-urls http://127.0.95.1:23801 --initial-advertise-peer-urls http://127.0.95.1:23801 \
    --initial-cluster bench=http://127.0.95.1:23801 >"$BASE/etcd.log" 2>&1 </dev/null &
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.95.1/23791) 2>/dev/null && break; sleep 0.2; done
  spec v1 >"$BASE/v1.yaml"
  spec v2 >"$BASE/v2.yaml"
  echo "== run $run/$RUNS: bring-up (not timed)"
  "$BIN" apply -f "$BASE/v1.yaml" --wait --timeout 10m >/dev/null
  sleep 3 # let every controller settle on the converged revision
  poll_swarm >"$RESULTS/swarm-$run.log" &
  POLLER=$!
  echo "== run $run/$RUNS: rolling update"
  start=$(date +%s%3N)
  "$BIN" apply -f "$BASE/v2.yaml" --wait --timeout 15m >/dev/null
  end=$(date +%s%3N)
  stop_poller
  echo "$start $end" >"$RESULTS/total-$run.txt"
  "$BIN" events --since 1h --output json >"$RESULTS/events-$run.json"
done
stop_poller
down
trap - EXIT

python3 - "$RESULTS" "$RUNS" "$WATCH_MANAGERS" "$WATCH_WORKERS" <<'PY'
import json, statistics, sys, collections
res, runs, watch = sys.argv[1], int(sys.argv[2]), {"managers": int(sys.argv[3]) * 1000, "workers": int(sys.argv[4]) * 1000}

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def kind(reason):
    for k in ("demote self", "provision", "drain", "demote", "destroy", "remove node"):
        if reason.startswith(k):
            return k
    return reason.split(" ")[0]

totals, engine_parts, drover_parts, gaps_total, gaps_after = [], collections.defaultdict(list), collections.defaultdict(list), [], []
for run in range(1, runs + 1):
    start, end = map(int, open(f"{res}/total-{run}.txt").read().split())
    totals.append((end - start) / 1000)
    events = [e for e in json.load(open(f"{res}/events-{run}.json")) if e["at_ms"] >= start]
    # Swarm snapshots: time -> {node id: (hostname, status, manager status)}
    snaps = []
    for line in open(f"{res}/swarm-{run}.log"):
        t, *nodes = line.split()
        snaps.append((int(t), [n.split(":") for n in nodes]))
    def ready_at(after, count_before):
        """First snapshot after `after` with more Ready nodes than at `after`."""
        for t, nodes in snaps:
            if t > after and sum(1 for n in nodes if n[2] == "Ready") > count_before:
                return t
        return None
    def ready_count(at):
        best = None
        for t, nodes in snaps:
            if t <= at:
                best = sum(1 for n in nodes if n[2] == "Ready")
        return best or 0
    by_op = collections.defaultdict(list)
    for e in events:
        if e.get("op"):
            by_op[e["op"]].append(e)
    for op, evs in by_op.items():
        evs.sort(key=lambda e: e["at_ms"])
        group = evs[0].get("group") or "?"
        steps = []  # (kind, start, end)
        open_steps = {}
        for e in evs:
            if e["action"] != "step":
                continue
            k = kind(e["reason"])
            if e["outcome"] == "started":
                open_steps[k] = e["at_ms"]
            elif k in open_steps:
                steps.append((k, open_steps.pop(k), e["at_ms"]))
        begin = next((e["at_ms"] for e in evs if e["action"] == "begin"), None)
        prev_end = begin
        for k, s, f in steps:
            engine_parts[f"{group}: {k}"].append((f - s) / 1000)
            if prev_end is not None:
                drover_parts[f"{group}: before {k}"].append((s - prev_end) / 1000)
            prev_end = f
        # After the provision: join and Ready (the engine), the watch (the
        # spec), then the operation's end (drover); the end is the next
        # operation's begin in the group, when there is one.
        prov = [x for x in steps if x[0] == "provision"]
        if prov:
            pend = prov[-1][2]
            ready = ready_at(pend, ready_count(pend))
            later = sorted(e["at_ms"] for e in events if e.get("group") == group and e["action"] == "begin" and e["at_ms"] > pend)
            if ready:
                engine_parts[f"{group}: join until Ready"].append(max(0, ready - pend) / 1000)
                if later:
                    drover_parts[f"{group}: after Ready + watch, next op"].append((later[0] - ready - watch.get(group, 0)) / 1000)
    # Failover: the leader's self-demotion to the next controller's first action.
    demote = next((e for e in events if e["action"] == "step" and e["reason"].startswith("demote self") and e["outcome"] == "started"), None)
    if demote:
        t0, old = demote["at_ms"], demote["controller"]
        first = next((e["at_ms"] for e in events if e["at_ms"] > t0 and e["controller"] != old), None)
        leaders = [(t, [n[0] for n in nodes if n[3:] and n[3] == "Leader"]) for t, nodes in snaps]
        before = next((l for t, l in reversed(leaders) if t <= t0), None)
        new_leader = next((t for t, l in leaders if t > t0 and l and l != before), None)
        if first:
            gaps_total.append((first - t0) / 1000)
            if new_leader:
                gaps_after.append((first - new_leader) / 1000)

print(f"\n## Real engines: 3 managers + 2 workers rolling update on the local provider ({runs} runs, medians)\n")
print(f"Total rollout: {med(totals):.1f} s (runs: {' '.join(f'{t:.1f}' for t in totals)}); watch {sys.argv[3]} s per manager, {sys.argv[4]} s per worker batch.\n")
print("| step | engine s (median) | samples |")
print("|---|---|---|")
for k in sorted(engine_parts):
    print(f"| {k} | {med(engine_parts[k]):.2f} | {len(engine_parts[k])} |")
print("\n| drover's part | s (median) | max | samples |")
print("|---|---|---|---|")
for k in sorted(drover_parts):
    v = drover_parts[k]
    print(f"| {k} | {med(v):.2f} | {max(v):.2f} | {len(v)} |")
print("\n| failover | s (median) | runs |")
print("|---|---|---|")
print(f"| old leader's self-demotion → next controller's first action | {med(gaps_total):.2f} | {' '.join(f'{g:.2f}' for g in gaps_total)} |")
print(f"| swarm reports the new leader → next controller's first action | {med(gaps_after):.2f} | {' '.join(f'{g:.2f}' for g in gaps_after)} |")
print(f"\nRaw data: {res}")
PY
