//! Test-only launchers, shared with other crates' tests through
//! `drover_store::testkit`: `etcd` and one single-node swarm `dockerd`.

#![allow(dead_code, unused_imports)]

pub use drover_store::testkit::{Dockerd, Etcd};

/// A one-group spec (workers `web` of `size`), the cases' desired state.
pub fn spec(size: u32) -> drover_core::spec::ClusterSpec {
    let text = format!(
        "groups:\n  - name: web\n    role: worker\n    allocation:\n      size: {size}\n    instance:\n      provider: local\n"
    );
    drover_core::spec::parse_str(&text)
        .spec
        .expect("valid spec")
}
