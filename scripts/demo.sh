#!/usr/bin/env bash
# drover's demo on one machine: a real swarm of 3 managers + 2 workers, each
# a real dockerd on a loopback address, managed by drover (controllers on the
# managers, desired state in a local etcd), then a rolling update through it,
# leader last, without losing quorum.
#
#   scripts/demo.sh        # set up, build, bring the cluster up, roll a change
#   scripts/demo.sh down   # stop every process the demo started, remove its files
#
# Needs root (dockerd). Uses only 127.0.1.x and 127.0.0.1:23791/23801.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${DROVER_DEMO_DIR:-/tmp/drover-demo}
export DROVER_STORE=etcd://127.0.0.1:23791
export DROVER_LOCAL_DIR=$DEMO/machines
export DROVER_LOCAL_POOL=127.0.1.20-127.0.1.60
export DROVER_LOG=${DROVER_LOG:-warn}

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
  [ -d "$DEMO" ] || { echo "nothing to tear down ($DEMO does not exist)"; return; }
  stop_matching "$DEMO/machines"
  stop_matching "$DEMO/etcd"
  awk -v d="$DEMO" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$DEMO"
  echo "demo removed: no process or file of it is left"
}

if [ "${1:-up}" = down ]; then down; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "the demo starts dockerd processes: run it as root" >&2; exit 2; }

scripts/setup.sh
cargo build -q -p drover
BIN=$PWD/target/debug/drover
mkdir -p "$DEMO"

if ! (exec 3<>/dev/tcp/127.0.0.1/23791) 2>/dev/null; then
  echo "starting etcd (the store) on 127.0.0.1:23791"
  nohup etcd --name demo --data-dir "$DEMO/etcd" \
    --listen-client-urls http://127.0.0.1:23791 --advertise-client-urls http://127.0.0.1:23791 \
    --listen-peer-urls http://127.0.0.1:23801 --initial-advertise-peer-urls http://127.0.0.1:23801 \
    --initial-cluster demo=http://127.0.0.1:23801 >"$DEMO/etcd.log" 2>&1 </dev/null &
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/23791) 2>/dev/null && break; sleep 0.2; done
fi

spec() {
  cat <<YAML
groups:
- name: managers
  role: manager
  allocation:
    logical_ids: [127.0.1.11, 127.0.1.12, 127.0.1.13]
  instance: {provider: local}
  flavor: {engine_labels: {release: "$1"}}
  update: {watch: 3s}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: local}
  flavor: {engine_labels: {release: "$1"}}
  update: {watch: 2s}
YAML
}
spec v1 >"$DEMO/cluster.yaml"
spec v2 >"$DEMO/cluster-v2.yaml"

echo; echo "== 1. bring the cluster up from nothing: drover apply -f $DEMO/cluster.yaml --wait"
"$BIN" apply -f "$DEMO/cluster.yaml" --wait
"$BIN" status
echo; echo "== 2. roll a change through it (engine label release: v2), followers first, the leader last"
"$BIN" apply -f "$DEMO/cluster-v2.yaml" --wait
"$BIN" status
cat <<EOF2

Look around (these variables are already set in this script; export them in your shell):
  export DROVER_STORE=$DROVER_STORE DROVER_LOCAL_DIR=$DROVER_LOCAL_DIR DROVER_LOCAL_POOL=$DROVER_LOCAL_POOL
  $BIN status
  docker -H unix://\$(ls -d $DEMO/machines/instances/*/ | head -1)sock node ls   # on a manager
  $BIN plan -f $DEMO/cluster.yaml --sim                                              # the steps, simulated
Tear everything down:
  scripts/demo.sh down
EOF2
