# shellcheck shell=bash
# Helpers shared by the real-engine benchmarks (scripts/bench-real.sh,
# scripts/bench-scale.sh): sourced, never run. Everything they stop or
# remove is found through the benchmark's own directory, so a benchmark can
# share the machine with the test suite and with another benchmark.

# Stops every process whose command line names $1 (verified, by PID), then
# SIGKILL after 10 s.
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

# Stops every process of the benchmark directory $1 (its machines, then its
# etcd), unmounts what its engines left mounted there, and removes it.
bench_down() {
  local base=$1
  [ -d "$base" ] || return 0
  # Again until none is left: a controller may be provisioning a machine
  # (healing after a kill) while the first round stops the others.
  for _ in 1 2 3; do stop_matching "$base/machines"; done
  stop_matching "$base/etcd"
  awk -v d="$base" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$base"
}

# Starts a single-member etcd with its data in $1/etcd, clients on
# $2:$3 and peers on $2:$4, and waits (≤ 10 s) until it accepts
# connections.
bench_etcd() {
  local base=$1 ip=$2 client=$3 peer=$4
  nohup etcd --name bench --data-dir "$base/etcd" \
    --listen-client-urls "http://$ip:$client" --advertise-client-urls "http://$ip:$client" \
    --listen-peer-urls "http://$ip:$peer" --initial-advertise-peer-urls "http://$ip:$peer" \
    --initial-cluster "bench=http://$ip:$peer" >"$base/etcd.log" 2>&1 </dev/null &
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/$ip/$client") 2>/dev/null && return 0; sleep 0.2; done
  echo "etcd did not answer on $ip:$client (log: $base/etcd.log)" >&2
  return 1
}
