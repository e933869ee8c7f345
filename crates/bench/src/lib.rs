//! # drover-bench
//!
//! Holds drover's benchmark target (`benches/drover`), run by
//! `scripts/bench.sh` (`cargo bench -p drover-bench`). The library is empty
//! on purpose: benchmarks are never part of `cargo test`.
