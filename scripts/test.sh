#!/usr/bin/env bash
# Runs every drover test, installing what they need first.
# Real-engine tests start their own dockerd/etcd processes on loopback and stop them by PID.
#
# The end-to-end suites (crates/drover/tests/e2e_*.rs) take minutes each, mostly
# waiting on engines and timers, and each uses its own loopback range: they run
# two at a time (DROVER_E2E_JOBS), next to the rest of the suite, with their
# output kept in target/test-logs/ and printed when one fails. More at once
# starves a 2-core machine and trips the tests' own timeouts.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests on Incus machines (the incus provider's contract tests and
# the e2e_incus* suites) run unless DROVER_INCUS=0 (a machine that cannot run Incus
# system containers); setup.sh then installs and starts Incus.
if [ "${DROVER_INCUS:-1}" != 0 ]; then export DROVER_INCUS=1; fi
scripts/setup.sh
# The engines' swarm init makes a `docker_gwbridge` bridge in this host's
# network namespace (they all share it), which no engine removes when it
# stops: removed after the run when the run made it.
gwbridge_before=0
ip link show docker_gwbridge >/dev/null 2>&1 && gwbridge_before=1
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --no-run

logs=target/test-logs
rm -rf "$logs" && mkdir -p "$logs"
e2e=()
incus_suites=()
others=()
# A suite is a file tests/NAME.rs or a directory tests/NAME/ with a main.rs.
for f in crates/drover/tests/*.rs crates/drover/tests/*/main.rs; do
  case "$f" in
    */main.rs) t=$(basename "$(dirname "$f")") ;;
    *) t=$(basename "$f" .rs) ;;
  esac
  case "$t" in
    # The suites on Incus machines run one after the other, in one job
    # started first (the longest): two of them at once put a dozen booting
    # machines on two cores beside the other suites.
    e2e_incus*) [ "${DROVER_INCUS:-0}" = 1 ] && incus_suites+=("$t") ;;
    e2e_*) e2e+=("$t") ;;
    *) others+=(--test "$t") ;;
  esac
done
# The incus provider's own tests go first in that job: their machines are
# drover's, and a swarm-store bootstrap from the Incus host refuses to start
# a swarm while Incus holds any drover machine (it cannot tell a swarm that
# is absent from one it cannot see), so no two of them may overlap.
[ ${#incus_suites[@]} = 0 ] || e2e=("drover-incus ${incus_suites[*]}" "${e2e[@]}")

# E2e suites (and `drover-incus`: that package's tests), one after the
# other: each one's log, then an ok/FAILED line (the log in full on failure).
run_e2e() {
  local t status=0
  for t in "$@"; do
    local log=target/test-logs/$t.log start=$SECONDS cmd=(cargo test -p drover --locked --test "$t")
    [ "$t" = drover-incus ] && cmd=(cargo test -p drover-incus --locked)
    if "${cmd[@]}" >"$log" 2>&1; then
      echo "e2e $t: ok in $((SECONDS - start))s ($(grep -h 'test result' "$log" | tail -1))"
    else
      echo "e2e $t: FAILED after $((SECONDS - start))s; its output:"
      cat "$log"
      status=1
    fi
  done
  return "$status"
}
export -f run_e2e
printf '%s\n' "${e2e[@]}" | xargs -P "${DROVER_E2E_JOBS:-2}" -I{} bash -c 'run_e2e {}' &
e2e_pid=$!

status=0
cargo test --workspace --locked --exclude drover --exclude drover-incus || status=1
# Without Incus, the incus provider's unit tests still run (with it, they
# run in the Incus job, above).
[ "${DROVER_INCUS:-0}" = 1 ] || cargo test -p drover-incus --locked --lib || status=1
cargo test -p drover --locked --bins "${others[@]}" || status=1
wait "$e2e_pid" || status=1
if [ "$gwbridge_before" = 0 ] && ip link show docker_gwbridge >/dev/null 2>&1; then
  ip link delete docker_gwbridge || status=1
fi
exit "$status"
