#!/usr/bin/env bash
# Runs every drover test, installing what they need first.
# Real-engine tests start their own dockerd/etcd processes on loopback and stop them by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
