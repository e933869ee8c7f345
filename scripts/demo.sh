#!/usr/bin/env bash
# drover's demo on one machine, as the README runs it: installs what is
# missing (root), builds drover, brings a real local swarm up with
# `drover demo up` (3 managers + 2 workers, each a dockerd on a loopback
# address, controllers on the managers, etcd as the store), then rolls a
# change through it — followers first, the leader last — while you watch.
#
#   scripts/demo.sh        # set up, build, bring the cluster up, roll a change
#   scripts/demo.sh down   # stop every process the demo started, remove its files
#
# Uses only 127.0.1.x and 127.0.0.1:23791/23801. DROVER_DEMO_DIR,
# DROVER_DEMO_POOL and DROVER_DEMO_ETCD_PORT override the directory
# (/tmp/drover-demo), the addresses and etcd's port.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${DROVER_DEMO_DIR:-/tmp/drover-demo}
POOL=${DROVER_DEMO_POOL:-127.0.1.10-127.0.1.60}
PORT=${DROVER_DEMO_ETCD_PORT:-23791}
export DROVER_LOG=${DROVER_LOG:-warn}
BIN=$PWD/target/debug/drover

if [ "${1:-up}" = down ]; then
  [ -x "$BIN" ] || cargo build -q -p drover
  exec "$BIN" demo down --dir "$DEMO"
fi
if [ "$(id -u)" = 0 ]; then scripts/setup.sh; fi
cargo build -q -p drover

echo "== 1. bring the cluster up from nothing: drover demo up --dir $DEMO"
"$BIN" demo up --dir "$DEMO" --pool "$POOL" --etcd-port "$PORT"
export DROVER_STORE=etcd://127.0.0.1:$PORT DROVER_LOCAL_DIR=$DEMO/machines
echo; echo "== 2. roll a change through it (engine label release: v2), followers first, the leader last"
"$BIN" apply -f "$DEMO/cluster-v2.yaml" --wait
"$BIN" status
echo; echo "Tear everything down: scripts/demo.sh down"
