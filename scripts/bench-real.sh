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
#   - the failover gap, planned: from the old leader's self-demotion to the
#     swarm reporting the new leader, to the next leader's controller taking
#     over (its `took-over` event), to its first step;
#   - the failover gap, unplanned: `kill -9` of the leader's engine, idle
#     (odd runs: after the rollout converged) or mid-rollout (even runs: as
#     the workers' first operation begins), to the swarm reporting a new
#     leader, to the next controller's `took-over`, to its first step.
# Timestamps come from drover's audit log (`drover events`) and from polling
# `docker node ls` on every manager but the leader (a poller per engine,
# every 200 ms; the time is when the answer came: during an election the
# call blocks until there is a leader). The leader's own engine is never
# polled: polling an engine that demotes itself stretches its leave.
#
#   scripts/bench-real.sh [RUNS]      # default 3; takes a few minutes per run
#   scripts/bench-real.sh down        # stop everything it started, remove its files
#
# DROVER_BENCH_KILL=0: the planned hand-over only (every run rolls and
# converges; no kill -9): the leave -> destroy figure in half the time.
# DROVER_BENCH_NET / DROVER_BENCH_POOL_NET: the two /24s it uses (defaults
# 127.0.95 and 127.0.96), so a run can share the host with other tests.
#
# Needs root (dockerd), etcd, python3. Uses only $DROVER_BENCH_NET.x and
# $DROVER_BENCH_POOL_NET.x (127.0.95.x-127.0.96.x by default).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${DROVER_BENCH_DIR:-/tmp/drover-bench-real}
NET=${DROVER_BENCH_NET:-127.0.95}
POOL_NET=${DROVER_BENCH_POOL_NET:-127.0.96}
KILL=${DROVER_BENCH_KILL:-1}
export DROVER_STORE=etcd://$NET.1:23791
export DROVER_LOCAL_DIR=$BASE/machines
export DROVER_LOCAL_POOL=$POOL_NET.20-$POOL_NET.80
export DROVER_LOG=${DROVER_LOG:-warn}
WATCH_MANAGERS=3
WATCH_WORKERS=2

# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
down() { bench_down "$BASE"; }

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
    logical_ids: [$NET.11, $NET.12, $NET.13]
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

# One poller per manager engine, every 200 ms: "<asked ms> <answered ms>
# <node id>:<hostname>:<state>:<manager status>:<self> ...". A poller stops
# for good once its engine reports itself the leader (or says it is no
# swarm manager, after it answered as one): polling the engine that demotes
# itself stretches its leave (swarm-facts). Other errors (a follower during
# an election: "the swarm does not have a leader") do not stop it: its next
# answer may be the one that names the new leader.
poll_engine() {
  local sock=$1 stop=$2 t0 t1 out line answered=""
  while [ -S "$sock" ] && [ ! -e "$stop" ]; do
    t0=$(date +%s%3N)
    if out=$(timeout 30 docker -H "unix://$sock" node ls --format '{{.ID}}:{{.Hostname}}:{{.Status}}:{{.ManagerStatus}}:{{.Self}}' 2>&1); then
      line=$(tr '\n' ' ' <<<"$out")
    else
      line=""
    fi
    t1=$(date +%s%3N)
    if [ -n "$line" ]; then
      answered=1
      echo "$t0 $t1 $line"
      case "$line" in *":Leader:true "*) return 0 ;; esac
    elif [ -n "$answered" ] && [[ $out == *"not a swarm manager"* ]]; then
      return 0
    fi
    sleep 0.2
  done
}
# Starts a poller for every engine socket that appears (workers answer
# nothing and are asked again), until "$1.stop" exists.
POLLER=""
poll_swarm() {
  local out=$1 sock
  declare -A started=()
  while [ ! -e "$out.stop" ]; do
    for sock in "$BASE"/machines/instances/*/sock; do
      [ -S "$sock" ] && [ -z "${started[$sock]:-}" ] || continue
      started[$sock]=1
      poll_engine "$sock" "$out.stop" >>"$out" &
    done
    sleep 0.2
  done
  wait
}
TAILER=""
stop_poller() {
  if [ -n "$POLLER" ]; then
    touch "$RESULTS/swarm-$run.log.stop"
    wait "$POLLER" 2>/dev/null || true
    POLLER=""
  fi
  if [ -n "$TAILER" ]; then
    kill "$TAILER" 2>/dev/null || true
    wait "$TAILER" 2>/dev/null || true
    TAILER=""
  fi
}

# The instance directory of the machine whose engine is the leader.
leader_dir() {
  local sock
  for sock in "$BASE"/machines/instances/*/sock; do
    [ -S "$sock" ] || continue
    if timeout 5 docker -H "unix://$sock" node ls --format '{{.Self}}:{{.ManagerStatus}}' 2>/dev/null | grep -qx 'true:Leader'; then
      dirname "$sock"
      return 0
    fi
  done
  return 1
}

# Waits (≤ $2 s) until the audit log holds an event after $1 (ms) matching
# the python expression $3 over `e`.
await_event() {
  local since=$1 limit=$2 expr=$3
  for _ in $(seq $((limit * 2))); do
    "$BIN" events --since 1h --output json 2>/dev/null | python3 -c "
import json, sys
since = int(sys.argv[1])
sys.exit(0 if any(e['at_ms'] > since and ($expr) for e in json.load(sys.stdin)) else 1)" "$since" && return 0
    sleep 0.5
  done
  return 1
}

# kill -9 of the leader's engine (its dockerd alone, as a crash would);
# records the time and waits for the next controller's took-over and steps.
crash_leader() {
  local run=$1 mode=$2 dir t
  dir=$(leader_dir) || { echo "   no leader found to kill" >&2; return 0; }
  t=$(date +%s%3N)
  kill -9 "$(cat "$dir/pid")"
  echo "$t $mode" >"$RESULTS/kill-$run.txt"
  echo "== run $run/$RUNS: killed the leader's engine ($mode); waiting for the next controller"
  await_event "$t" 90 "e['action'] == 'took-over'" || echo "   no took-over within 90 s" >&2
  # Its first step, when there is one to take soon (a worker op in flight).
  await_event "$t" 20 "e['action'] == 'step' and e['outcome'] == 'started'" || true
}

for run in $(seq "$RUNS"); do
  down
  mkdir -p "$BASE"
  bench_etcd "$BASE" "$NET.1" 23791 23801
  spec v1 >"$BASE/v1.yaml"
  spec v2 >"$BASE/v2.yaml"
  echo "== run $run/$RUNS: bring-up (not timed)"
  "$BIN" apply -f "$BASE/v1.yaml" --wait --timeout 10m >/dev/null
  sleep 3 # let every controller settle on the converged revision
  poll_swarm "$RESULTS/swarm-$run.log" &
  POLLER=$!
  # The leader's dockerd log, read from its file (its API is not asked):
  # when its leave really happened.
  if dir=$(leader_dir); then
    tail -n 0 -F "$dir/log" >"$RESULTS/leader-$run.log" 2>/dev/null &
    TAILER=$!
  fi
  start=$(date +%s%3N)
  echo "$start" >"$RESULTS/start-$run.txt"
  if [ "$KILL" = 0 ]; then
    echo "== run $run/$RUNS: rolling update (no kill)"
    "$BIN" apply -f "$BASE/v2.yaml" --wait --timeout 15m >/dev/null
    end=$(date +%s%3N)
    echo "$start $end" >"$RESULTS/total-$run.txt"
  elif [ $((run % 2)) = 1 ]; then
    echo "== run $run/$RUNS: rolling update, then kill -9 of the idle leader's engine"
    "$BIN" apply -f "$BASE/v2.yaml" --wait --timeout 15m >/dev/null
    end=$(date +%s%3N)
    echo "$start $end" >"$RESULTS/total-$run.txt"
    sleep 3
    crash_leader "$run" idle
  else
    echo "== run $run/$RUNS: rolling update, kill -9 of the leader's engine as the workers' first operation begins"
    "$BIN" apply -f "$BASE/v2.yaml" >/dev/null
    await_event "$start" 600 "e['action'] == 'begin' and e.get('group') == 'workers'" ||
      echo "   the workers never began" >&2
    crash_leader "$run" mid-rollout
  fi
  stop_poller
  "$BIN" events --since 1h --output json >"$RESULTS/events-$run.json"
  # The controllers' heartbeats (etcd's JSON gateway): when the former
  # leader's controller reported its engine's leave (`engine.left.at_ms`).
  curl -s -X POST "http://$NET.1:23791/v3/kv/range" \
    -d "{\"key\":\"$(printf /drover/default/controllers/ | base64 -w0)\",\"range_end\":\"$(printf /drover/default/controllers0 | base64 -w0)\"}" \
    >"$RESULTS/beats-$run.json" || true
  # The controllers' logs, for a breakdown of their passes (DROVER_LOG).
  for log in "$BASE"/machines/instances/*/controller.log; do
    [ -f "$log" ] && cp "$log" "$RESULTS/controller-$run-$(basename "$(dirname "$log")").log"
  done
done
stop_poller
down
trap - EXIT

python3 - "$RESULTS" "$RUNS" "$WATCH_MANAGERS" "$WATCH_WORKERS" <<'PY'
import base64, collections, datetime, json, os, re, statistics, sys
res, runs, watch = sys.argv[1], int(sys.argv[2]), {"managers": int(sys.argv[3]) * 1000, "workers": int(sys.argv[4]) * 1000}

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def kind(reason):
    for k in ("demote self", "provision", "drain", "demote", "destroy", "remove node"):
        if reason.startswith(k):
            return k
    return reason.split(" ")[0]

def fmt(xs):
    return " ".join(f"{x:.2f}" for x in xs)

totals, engine_parts, drover_parts = [], collections.defaultdict(list), collections.defaultdict(list)
# Failover gaps per scenario and segment: seconds per run.
gaps = collections.defaultdict(lambda: collections.defaultdict(list))
for run in range(1, runs + 1):
    events = json.load(open(f"{res}/events-{run}.json"))
    total = f"{res}/total-{run}.txt"
    if os.path.exists(total):
        start, end = map(int, open(total).read().split())
        totals.append((end - start) / 1000)
    else:
        start, end = int(open(f"{res}/start-{run}.txt").read()), None
    events = [e for e in events if e["at_ms"] >= start]
    # Swarm snapshots, by the time the answer came: [(t, [[id, host, status, manager status, self]])]
    snaps = []
    for line in open(f"{res}/swarm-{run}.log"):
        _, t, *nodes = line.split()
        snaps.append((int(t), [n.split(":") for n in nodes]))
    snaps.sort(key=lambda s: s[0])
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
    if end is not None:
        by_op = collections.defaultdict(list)
        for e in events:
            if e.get("op") and e["at_ms"] <= end:
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
                later = sorted(e["at_ms"] for e in events if e.get("group") == group and e["action"] == "begin" and pend < e["at_ms"] <= end)
                if ready:
                    engine_parts[f"{group}: join until Ready"].append(max(0, ready - pend) / 1000)
                    if later:
                        drover_parts[f"{group}: after Ready + watch, next op"].append((later[0] - ready - watch.get(group, 0)) / 1000)

    leaders = [(t, [n[0] for n in nodes if n[3:] and n[3] == "Leader"]) for t, nodes in snaps]
    def failover(scenario, t0, old):
        """t0 → the swarm reports another leader → another controller took over → its first step."""
        before = next((l for t, l in reversed(leaders) if t <= t0), None)
        t_leader = next((t for t, l in leaders if t > t0 and l and l != before), None)
        took = next((e for e in events if e["at_ms"] > t0 and e["action"] == "took-over" and e["controller"] != old), None)
        step = took and next((e["at_ms"] for e in events if e["at_ms"] >= took["at_ms"] and e["controller"] == took["controller"] and e["action"] == "step" and e["outcome"] == "started"), None)
        g = gaps[scenario]
        if t_leader:
            g["t0 → swarm reports the new leader"].append((t_leader - t0) / 1000)
        if took:
            g["t0 → took-over"].append((took["at_ms"] - t0) / 1000)
            if t_leader:
                g["new leader reported → took-over (target < 1 s)"].append((took["at_ms"] - t_leader) / 1000)
        if step:
            g["t0 → its first step"].append((step - t0) / 1000)
            if t_leader:
                g["new leader reported → its first step"].append((step - t_leader) / 1000)
            g["took-over → its first step"].append((step - took["at_ms"]) / 1000)

    # Planned: the leader's self-demotion.
    demote = next((e for e in events if e["action"] == "step" and e["reason"].startswith("demote self") and e["outcome"] == "started"), None)
    if demote:
        failover("planned: self-demotion", demote["at_ms"], demote["controller"])
        # Its engine's own log: when it shut its manager down and left.
        log = f"{res}/leader-{run}.log"
        marks = {}
        for line in open(log) if os.path.exists(log) else []:
            m = re.match(r'time="([^"]+)"', line)
            if not m:
                continue
            t = datetime.datetime.fromisoformat(m.group(1)[:26] + "+00:00").timestamp() * 1000
            if "demoted; transferring leadership" in line:
                marks.setdefault("demoted", t)
            elif "Manager shut down" in line and "demoted" in marks:
                marks.setdefault("shut down", t)
            elif "left gossip cluster" in line and "shut down" in marks:
                # Its own node: it sees no other leave after its own. The
                # network layer's leave, after swarmkit's node has stopped
                # (the engine's state reads inactive before it), or even
                # after its machine's destroy began.
                marks.setdefault("left", t)
        g = gaps["planned: self-demotion"]
        # Its controller's report of the leave (its heartbeat), when it made one.
        reported = None
        beats = f"{res}/beats-{run}.json"
        if os.path.exists(beats):
            for kv in json.load(open(beats)).get("kvs", []):
                beat = json.loads(base64.b64decode(kv["value"]))
                beat = beat.get("data", beat)
                left = (beat.get("engine") or {}).get("left")
                if left and left["at_ms"] > demote["at_ms"]:
                    reported = left["at_ms"]
        first_step = next((e["at_ms"] for e in events if e["at_ms"] > demote["at_ms"] and e["controller"] != demote["controller"] and e["action"] == "step" and e["outcome"] == "started"), None)
        if reported and first_step:
            g["ex-leader's controller reported the leave (heartbeat) → new controller destroys it"].append((first_step - reported) / 1000)
        if "demoted" in marks and reported:
            g["ex-leader's engine: demoted → its controller reported the leave"].append((reported - marks["demoted"]) / 1000)
        if "demoted" in marks and "left" in marks:
            if "shut down" in marks:
                g["ex-leader's engine: demoted → manager shut down (its log)"].append((marks["shut down"] - marks["demoted"]) / 1000)
            g["ex-leader's engine: demoted → left the gossip cluster (its log: the leave's end)"].append((marks["left"] - marks["demoted"]) / 1000)
            first = next((e["at_ms"] for e in events if e["at_ms"] > demote["at_ms"] and e["controller"] != demote["controller"] and e["action"] == "step" and e["outcome"] == "started"), None)
            if first:
                g["ex-leader left → new controller destroys it"].append((first - marks["left"]) / 1000)
    # Unplanned: kill -9 of the leader's engine.
    kill = f"{res}/kill-{run}.txt"
    if os.path.exists(kill):
        t, mode = open(kill).read().split()
        t = int(t)
        old = next((e["controller"] for e in reversed(events) if e["at_ms"] <= t and e["action"] == "took-over"), None)
        failover(f"unplanned: kill -9, {mode}", t, old)

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
print("\nFailover (t0: the leader's self-demotion started, or its engine killed):\n")
print("| scenario | segment | s (median) | runs |")
print("|---|---|---|---|")
for scenario in sorted(gaps):
    for seg, v in gaps[scenario].items():
        print(f"| {scenario} | {seg} | {med(v):.2f} | {fmt(v)} |")
print(f"\nRaw data: {res}")
PY
